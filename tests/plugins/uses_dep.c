/* Test plugin that needs libdep.so (tests/plugins/dep.c): its pass returns dep_value(), so the
 * copy of the dependency the loader found shows in the result. */
#include "dylease.h"

int dep_value(void);
static int value(void) { return dep_value(); }

DYLEASE_PLUGIN("uses-dep", "0.1")
DYLEASE_PASS("dep_value", value)
