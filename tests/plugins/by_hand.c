/* Test plugin written without the header's macros: a hand-filled descriptor. Compiler flags
 * turn it into each kind of broken plugin the host must refuse:
 *   -DABI=n              descriptor ABI version (default 1)
 *   -DNAME=expr          descriptor name, may be 0 (default "by-hand")
 *   -DNULL_DESCRIPTOR    the entry point returns NULL
 *   -DNULL_REGISTER      register_passes is NULL
 *   -DREGISTER_RESULT=n  what register_passes returns after adding its passes (default 0)
 *   -DNULL_FUNCTION      also adds a pass "broken" with a NULL function, ignoring the refusal
 *   -DUNRESOLVED         refers to a function no library defines (RTLD_NOW must refuse it)
 *   -DSTALE              keeps the registrar and offers a pass "add_late" that calls add_pass
 *                        with it after registration has ended
 *   -DEXTRA_PASS_NAME=e  also adds a pass named e (may be 0), ignoring a refusal
 *   -DHUGE               defines huge_name, a 1 MiB name (for -DNAME or -DEXTRA_PASS_NAME)
 *   -DMARK_CONSTRUCTOR   a constructor creates the file "<this library's path>.ran": proof that
 *                        the library's code ran
 *   -DMARK_TEXT=s        (with -DMARK_CONSTRUCTOR) the constructor writes the string s into it:
 *                        which bytes of the file ran
 *   -DMANIFEST           writes the manifest's plugin record, DYLEASE_MANIFEST(NAME, "1")
 *   -DFUTURE_ABI=n       the descriptor and the manifest's plugin record (with -DMANIFEST) say
 *                        ABI version n, as the header of a later dylease would write them
 *   -DGHOST_MANIFEST     writes a complete manifest declaring the passes it registers and one
 *                        more, "ghost", that it never registers
 *   -DRETYPED_MANIFEST   writes a complete manifest declaring "seven" of interface
 *                        "test.int_op/1", which it registers untyped */
#ifdef MARK_CONSTRUCTOR
#include "events.h"
#endif
#ifdef HUGE
#include <string.h>
#endif
#include "dylease.h"

#ifdef FUTURE_ABI
#undef DYLEASE_ABI_VERSION
#define DYLEASE_ABI_VERSION FUTURE_ABI
#endif
#ifndef ABI
#define ABI DYLEASE_ABI_VERSION
#endif
#ifndef NAME
#define NAME "by-hand"
#endif
#ifndef REGISTER_RESULT
#define REGISTER_RESULT 0
#endif

/* How many times register_passes ran in this mapping of the library: a fresh mapping starts
 * from zero, so every generation whose library was really reloaded reports 1. */
static int registrations;

static int seven(void) { return 7; }

#ifdef HUGE
/* 1 MiB of 'a' and a NUL, filled in by the entry point. */
static char huge_name[(1 << 20) + 1];
#endif

#ifdef MARK_CONSTRUCTOR
__attribute__((constructor)) static void mark(void) {
    char self[4096];
    char path[4200];
    self_path((void *)mark, self, sizeof self);
    if (self[0]) {
        snprintf(path, sizeof path, "%s.ran", self);
        FILE *f = fopen(path, "w");
#ifdef MARK_TEXT
        if (f) fputs(MARK_TEXT, f);
#endif
        if (f) fclose(f);
    }
}
#endif
static int get_registrations(void) { return registrations; }

#ifdef UNRESOLVED
extern int dylease_test_symbol_nobody_defines(void);
static int calls_missing(void) { return dylease_test_symbol_nobody_defines(); }
#endif

#ifdef STALE
static const dylease_host_api *kept_api;
static dylease_registrar *kept_reg;
static int add_late(void) { return kept_api->add_pass(kept_reg, "late", (dylease_fn)seven, 0); }
#endif

__attribute__((unused)) static int32_t register_passes(const dylease_host_api *api, dylease_registrar *reg) {
    registrations += 1;
#ifdef STALE
    kept_api = api;
    kept_reg = reg;
    if (api->add_pass(reg, "add_late", (dylease_fn)add_late, 0) != 0) return -1;
#endif
    if (api->add_pass(reg, "seven", (dylease_fn)seven, 0) != 0) return -1;
    if (api->add_pass(reg, "registrations", (dylease_fn)get_registrations, 0) != 0) return -1;
#ifdef NULL_FUNCTION
    (void)api->add_pass(reg, "broken", 0, 0);
#endif
#ifdef EXTRA_PASS_NAME
    (void)api->add_pass(reg, EXTRA_PASS_NAME, (dylease_fn)seven, 0);
#endif
#ifdef UNRESOLVED
    if (api->add_pass(reg, "calls_missing", (dylease_fn)calls_missing, 0) != 0) return -1;
#endif
    return REGISTER_RESULT;
}

#ifdef NULL_REGISTER
__attribute__((unused)) static const dylease_plugin descriptor = {ABI, NAME, "1", 0, 0};
#else
__attribute__((unused)) static const dylease_plugin descriptor = {ABI, NAME, "1", register_passes, 0};
#endif

#ifdef MANIFEST
DYLEASE_MANIFEST(NAME, "1")
#endif
#ifdef GHOST_MANIFEST
DYLEASE_PLUGIN_NOTE_(NAME, "1", 1u)
DYLEASE_PASS_NOTE("seven", "", 0)
DYLEASE_PASS_NOTE("registrations", "", 1)
DYLEASE_PASS_NOTE("ghost", "", 2)
#endif
#ifdef RETYPED_MANIFEST
DYLEASE_PLUGIN_NOTE_(NAME, "1", 1u)
DYLEASE_PASS_NOTE("seven", "test.int_op/1", 0)
DYLEASE_PASS_NOTE("registrations", "", 1)
#endif

const dylease_plugin *dylease_plugin_v1(void) {
#ifdef HUGE
    memset(huge_name, 'a', sizeof huge_name - 1);
#endif
#ifdef NULL_DESCRIPTOR
    return 0;
#else
    return &descriptor;
#endif
}
