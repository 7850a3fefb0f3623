/* Test plugin: registers one pass name twice with the header's macros. */
#include "dylease.h"

static int one(void) { return 1; }

DYLEASE_PLUGIN("duplicate", "")
DYLEASE_PASS("same", one)
DYLEASE_PASS("same", one)
