/* For test plugins: log_event appends a line to "<this library's path>.log", a side channel
 * that survives the library's unload, so a test can tell which hooks ran, in which order and
 * how often. Include it first (it needs _GNU_SOURCE for dladdr) and link with -ldl. */
#ifndef DYLEASE_TEST_EVENTS_H
#define DYLEASE_TEST_EVENTS_H
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>

__attribute__((unused)) static void log_event(const char *event) {
    Dl_info self;
    char path[4096];
    if (dladdr((void *)log_event, &self) && self.dli_fname) {
        FILE *f;
        snprintf(path, sizeof path, "%s.log", self.dli_fname);
        f = fopen(path, "a");
        if (f) {
            fprintf(f, "%s\n", event);
            fclose(f);
        }
    }
}
#endif
