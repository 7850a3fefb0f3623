/* Test plugin built several times with -DPLUGIN_NAME="..." and -DPASS_NAME="...". */
#include "dylease.h"

static int identity(int x) { return x; }

DYLEASE_PLUGIN(PLUGIN_NAME, "0.1")
DYLEASE_PASS(PASS_NAME, identity)
