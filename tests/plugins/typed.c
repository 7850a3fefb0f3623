/* Test plugin of ABI version 2 written with the header's macros: typed and untyped passes and
 * both lifecycle hooks (each logs itself; see events.h). on_load makes the state the passes
 * read, on_unload frees it. Flags:
 *   -DON_LOAD_RESULT=n   what on_load returns (default 0)
 *   -DBAD_INTERFACE=e    also a typed pass "bad" with interface e
 *   -DLONG_INTERFACE     defines long_interface, a 257-byte literal (for -DBAD_INTERFACE) */
#include "events.h"
#include <stdlib.h>
#include "dylease.h"

#ifndef ON_LOAD_RESULT
#define ON_LOAD_RESULT 0
#endif

static int *state;

static int32_t on_load(void) {
    log_event("on_load");
    state = malloc(sizeof *state);
    if (state == 0) return -1;
    *state = 100;
    return ON_LOAD_RESULT;
}

static void on_unload(void) {
    log_event("on_unload");
    free(state);
    state = 0;
}

/* -1000 when on_load did not run (no state) */
static int fuse(int x) { return x / 2 + (state ? *state : -1000); }
static int scale(int x) { return 3 * x; }
static int plain(int x) { return x + 1; }
static int factor = 3;

DYLEASE_PLUGIN_WITH_HOOKS("typed", "2.0.0", on_load, on_unload)
DYLEASE_TYPED_PASS("fuse", "test.fusion_pass/1", fuse)
DYLEASE_TYPED_PASS_WITH_DATA("scale", "test.int_op/2", scale, &factor)
DYLEASE_PASS("plain", plain)

#ifdef LONG_INTERFACE
#define A16_ "aaaaaaaaaaaaaaaa"
#define A64_ A16_ A16_ A16_ A16_
#define long_interface A64_ A64_ A64_ A64_ "a"
#endif
#ifdef BAD_INTERFACE
DYLEASE_TYPED_PASS("bad", BAD_INTERFACE, plain)
#endif
