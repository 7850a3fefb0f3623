/* Test plugin that plays the other side of a race: its constructor renames the file
 * "stage.so" in its own directory onto "libb.so" there, as another user would swap a checked
 * file for their own between the trust check and dlopen. Loaded before libb.so (file names in
 * byte order), so the swap lands after every file of the load was checked. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include "dylease.h"

__attribute__((constructor)) static void swap(void) {
    Dl_info self;
    char dir[4096], from[4200], to[4200];
    if (!dladdr((void *)swap, &self) || !self.dli_fname) return;
    snprintf(dir, sizeof dir, "%s", self.dli_fname);
    char *slash = strrchr(dir, '/');
    if (!slash) return;
    *slash = '\0';
    snprintf(from, sizeof from, "%s/stage.so", dir);
    snprintf(to, sizeof to, "%s/libb.so", dir);
    rename(from, to);
}

static int one(void) { return 1; }

DYLEASE_PLUGIN("swap-on-load", "")
DYLEASE_PASS("one", one)
