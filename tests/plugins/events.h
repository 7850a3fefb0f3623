/* For test plugins: log_event appends a line to "<this library's path>.log", a side channel
 * that survives the library's unload, so a test can tell which hooks ran, in which order and
 * how often. Include it first (it needs _GNU_SOURCE for dladdr) and link with -ldl. */
#ifndef DYLEASE_TEST_EVENTS_H
#define DYLEASE_TEST_EVENTS_H
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* The path of the file this library was mapped from, into out (empty if unknown). dylease
 * hands the loader a name of the checked descriptor, /proc/self/fd/N, which is what dladdr
 * reports: its link names the file (" (deleted)" appended once it was renamed over). */
__attribute__((unused)) static void self_path(void *address, char *out, size_t size) {
    Dl_info self;
    ssize_t n;
    out[0] = '\0';
    if (!dladdr(address, &self) || !self.dli_fname) return;
    n = readlink(self.dli_fname, out, size - 1);
    if (n > 0) {
        size_t len = (size_t)n;
        const char *deleted = " (deleted)";
        out[len] = '\0';
        if (len > strlen(deleted) && strcmp(out + len - strlen(deleted), deleted) == 0)
            out[len - strlen(deleted)] = '\0';
        return;
    }
    snprintf(out, size, "%s", self.dli_fname);
}

__attribute__((unused)) static void log_event(const char *event) {
    char self[4096];
    char path[4200];
    self_path((void *)log_event, self, sizeof self);
    if (self[0]) {
        FILE *f;
        snprintf(path, sizeof path, "%s.log", self);
        f = fopen(path, "a");
        if (f) {
            fprintf(f, "%s\n", event);
            fclose(f);
        }
    }
}
#endif
