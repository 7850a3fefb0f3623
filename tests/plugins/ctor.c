/* Test plugin: counts how often its constructor ran in this mapping of the library. A fresh
 * mapping starts from zero, so a second generation that reports 1 was really reloaded. */
#include "dylease.h"

static int ctor_runs;

__attribute__((constructor)) static void count_ctor(void) { ctor_runs += 1; }

static int get_ctor_runs(void) { return ctor_runs; }
static int answer(void) { return 42; }

DYLEASE_PLUGIN("ctor", "")
DYLEASE_PASS("ctor_runs", get_ctor_runs)
DYLEASE_PASS("answer", answer)
