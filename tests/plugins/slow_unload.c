/* Test plugin whose on_unload waits on the test: it creates "<this library's path>.unloading",
 * then waits (at most 20 s) until "<this library's path>.go" exists. Its pass `version`
 * returns VERSION (default 1), and its on_load logs "on_load" (see events.h). */
#include "events.h"
#include <stdint.h>
#include <time.h>
#include "dylease.h"

#ifndef VERSION
#define VERSION 1
#endif

static int version(void) { return VERSION; }

static int32_t on_load(void) {
    log_event("on_load");
    return 0;
}

static void on_unload(void) {
    char self[4096], path[4200];
    FILE *f;
    int i;
    self_path((void *)on_unload, self, sizeof self);
    snprintf(path, sizeof path, "%s.unloading", self);
    f = fopen(path, "w");
    if (f) fclose(f);
    snprintf(path, sizeof path, "%s.go", self);
    for (i = 0; i < 20000; i++) {
        struct timespec ms = {0, 1000000};
        f = fopen(path, "r");
        if (f) {
            fclose(f);
            break;
        }
        nanosleep(&ms, 0);
    }
    log_event("on_unload");
}

DYLEASE_PLUGIN_WITH_HOOKS("slow-unload", "", on_load, on_unload)
DYLEASE_PASS("version", version)
