/* Test plugin whose on_unload holds its instance "unloading" for as long as the test wants: it
 * creates the file "unloading" in its own directory, then waits (at most 30 s) while the file
 * "hold" exists there. Built with -z nodelete, the mapping stays after the unload. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "dylease.h"

static char dir[4096];

__attribute__((constructor)) static void where(void) {
    Dl_info self;
    if (!dladdr((void *)where, &self) || !self.dli_fname) return;
    snprintf(dir, sizeof dir, "%s", self.dli_fname);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = '\0';
}

static void on_unload(void) {
    char path[4200];
    snprintf(path, sizeof path, "%s/unloading", dir);
    FILE *f = fopen(path, "w");
    if (f) fclose(f);
    snprintf(path, sizeof path, "%s/hold", dir);
    for (int i = 0; i < 3000 && access(path, F_OK) == 0; i++) usleep(10000);
}

static int one(void) { return 1; }

DYLEASE_PLUGIN_WITH_UNLOAD("slow-unload", "", on_unload)
DYLEASE_PASS("one", one)
