/* Test plugin that plays the other side of a race: its constructor renames the file
 * "stage.new" in its own directory onto "libb.so" there, as an installer (or another user) would replace a checked
 * file for their own between the trust check and dlopen. Loaded before libb.so (file names in
 * byte order), so the swap lands after every file of the load was checked. */
#include "events.h"
#include "dylease.h"

__attribute__((constructor)) static void swap(void) {
    char dir[4096], from[4200], to[4200];
    self_path((void *)swap, dir, sizeof dir);
    char *slash = strrchr(dir, '/');
    if (!slash) return;
    *slash = '\0';
    snprintf(from, sizeof from, "%s/stage.new", dir);
    snprintf(to, sizeof to, "%s/libb.so", dir);
    rename(from, to);
}

static int one(void) { return 1; }

DYLEASE_PLUGIN("swap-on-load", "")
DYLEASE_PASS("one", one)
