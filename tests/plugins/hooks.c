/* Test plugin of ABI version 2 written by hand, for the host's side of on_load, report and
 * the host API table's version. Every hook logs itself (see events.h). Flags:
 *   -DABI=n               descriptor ABI version (default DYLEASE_ABI_VERSION); with 1 the
 *                         descriptor still carries an on_load, which the host must not read
 *   -DNO_ON_LOAD          the descriptor's on_load is NULL
 *   -DON_LOAD_RESULT=n    what on_load returns (default 0)
 *   -DREGISTER_RESULT=n   what register_passes returns after adding its passes (default 0)
 *   -DREPORT=e            register_passes reports e (on a table of version 2 or later)
 *   -DSECOND_REPORT=e     then reports e too
 *   -DHUGE_REPORT         reports a 1 MiB message
 *   -DNULL_INTERFACE      also adds a typed pass "untyped" with a NULL interface, ignoring the
 *                         refusal */
#include "events.h"
#include <string.h>
#include "dylease.h"

#ifndef ABI
#define ABI DYLEASE_ABI_VERSION
#endif
#ifndef ON_LOAD_RESULT
#define ON_LOAD_RESULT 0
#endif
#ifndef REGISTER_RESULT
#define REGISTER_RESULT 0
#endif

/* The abi_version of the table the host handed register_passes. */
static uint32_t seen_api_version;

static int seven(void) { return 7; }
static int api_version(void) { return (int)seen_api_version; }

#ifdef HUGE_REPORT
static char huge_report[(1 << 20) + 1];
#endif

__attribute__((unused)) static int32_t on_load(void) {
    log_event("on_load");
    return ON_LOAD_RESULT;
}

static void on_unload(void) { log_event("on_unload"); }

static int32_t register_passes(const dylease_host_api *api, dylease_registrar *reg) {
    log_event("register");
    if (api == 0 || api->abi_version < 1) return -1;
    seen_api_version = api->abi_version;
    if (api->add_pass(reg, "seven", (dylease_fn)seven, 0) != 0) return -1;
    if (api->add_pass(reg, "api_version", (dylease_fn)api_version, 0) != 0) return -1;
    if (api->abi_version >= 2) {
        if (api->add_typed_pass(reg, "typed_seven", "test.int_source/1", (dylease_fn)seven, 0) != 0) return -1;
#ifdef NULL_INTERFACE
        (void)api->add_typed_pass(reg, "untyped", 0, (dylease_fn)seven, 0);
#endif
#ifdef REPORT
        api->report(reg, REPORT);
#endif
#ifdef SECOND_REPORT
        api->report(reg, SECOND_REPORT);
#endif
#ifdef HUGE_REPORT
        memset(huge_report, 'r', sizeof huge_report - 1);
        api->report(reg, huge_report);
#endif
    }
    return REGISTER_RESULT;
}

#ifdef NO_ON_LOAD
#define ON_LOAD_FN 0
#else
#define ON_LOAD_FN on_load
#endif

static const dylease_plugin descriptor = {ABI, "hooks", "2", register_passes, on_unload, ON_LOAD_FN};

const dylease_plugin *dylease_plugin_v1(void) { return &descriptor; }
