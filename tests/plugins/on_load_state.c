/* Test plugin that keeps its state the ABI v2 way: made in on_load, freed in on_unload, so a
 * library the platform keeps mapped (-z nodelete) still starts each instance afresh.
 * `bump` returns how often it ran in this instance; `ctor_runs` how often the constructor ran
 * in this mapping (a pinned library keeps 1: constructors run once per mapping). */
#include <stdlib.h>
#include "dylease.h"

static int *bumps;
static int constructed;

__attribute__((constructor)) static void construct(void) { constructed++; }

static int32_t on_load(void) {
    if (bumps) return -1; /* on_load twice on one instance, or on_unload skipped */
    bumps = calloc(1, sizeof *bumps);
    return bumps ? 0 : -2;
}

static void on_unload(void) {
    free(bumps);
    bumps = 0;
}

static int bump(void) { return bumps ? ++*bumps : -1; }
static int ctor_runs(void) { return constructed; }

DYLEASE_PLUGIN_WITH_HOOKS("on-load-state", "1", on_load, on_unload)
DYLEASE_PASS("bump", bump)
DYLEASE_PASS("ctor_runs", ctor_runs)
