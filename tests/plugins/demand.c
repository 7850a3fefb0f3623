/* Test plugin for on-demand sets (tests/integration/on_demand.rs): built with the header's
 * macros, so its manifest is complete; its constructor, on_load, register_passes (through a
 * register check) and on_unload log themselves (events.h). Flags:
 *   -DPLUGIN_NAME="n"     the plugin's name
 *   -DPASS_NAME="p"       its untyped pass, which returns x + OFFSET; its typed passes of
 *                         "test.int_op/1" are p "_z" and p "_a" (declared in that order)
 *   -DOFFSET=n            what its passes add (default 1)
 *   -DON_LOAD_RESULT=n    what on_load returns (default 0)
 *   -DSLOW_ON_LOAD        on_load sleeps 200 ms first
 *   -DREENTER             on_load calls the function whose address the file "reenter.hook"
 *                         next to the library holds, with the library's directory, and
 *                         returns what it returns */
#include "events.h"
#include <string.h>
#include <time.h>
#include "dylease.h"

#ifndef OFFSET
#define OFFSET 1
#endif
#ifndef ON_LOAD_RESULT
#define ON_LOAD_RESULT 0
#endif

static int plus(int x) { return x + OFFSET; }

__attribute__((constructor)) static void constructor(void) { log_event("constructor"); }

static int32_t on_load(void) {
    log_event("on_load");
#ifdef SLOW_ON_LOAD
    {
        struct timespec pause = {0, 200 * 1000 * 1000};
        nanosleep(&pause, 0);
    }
#endif
#ifdef REENTER
    {
        char dir[4096], hook[4200];
        void *address = 0;
        int (*call)(const char *);
        char *slash;
        FILE *file;
        int scanned;
        self_path((void *)on_load, dir, sizeof dir);
        slash = strrchr(dir, '/');
        if (!slash) return 1;
        *slash = '\0';
        snprintf(hook, sizeof hook, "%s/reenter.hook", dir);
        file = fopen(hook, "r");
        if (!file) return 1;
        scanned = fscanf(file, "%p", &address);
        fclose(file);
        if (scanned != 1 || !address) return 1;
        memcpy(&call, &address, sizeof call);
        return call(dir);
    }
#endif
    return ON_LOAD_RESULT;
}

static void on_unload(void) { log_event("on_unload"); }

static const char *registering(void) {
    log_event("register");
    return DYLEASE_NULL_;
}
DYLEASE_REGISTER_CHECK(registering)

DYLEASE_PLUGIN_WITH_HOOKS(PLUGIN_NAME, "1", on_load, on_unload)
DYLEASE_PASS(PASS_NAME, plus)
DYLEASE_TYPED_PASS(PASS_NAME "_z", "test.int_op/1", plus)
DYLEASE_TYPED_PASS(PASS_NAME "_a", "test.int_op/1", plus)
