// Test plugin in C++, first translation unit: defines the plugin and one pass.
#include "dylease.h"

static int square(int x) { return x * x; }

DYLEASE_PLUGIN("cpp-multi", "2.0")
DYLEASE_PASS("square", square)
