/* Test plugin that rewrites a checked file in place: its constructor truncates "libb.so" in
 * its own directory to 64 bytes (the same inode, a new length and modification time), as a
 * `cp` over an installed plugin would between the trust check and the load. Loaded before
 * libb.so (file names in byte order), so the change lands after every file of the load was
 * checked and read. */
#include "events.h"
#include "dylease.h"
#include <unistd.h>

__attribute__((constructor)) static void rewrite(void) {
    char dir[4096], target[4200];
    self_path((void *)rewrite, dir, sizeof dir);
    char *slash = strrchr(dir, '/');
    if (!slash) return;
    *slash = '\0';
    snprintf(target, sizeof target, "%s/libb.so", dir);
    if (truncate(target, 64) != 0) return;
}

static int one(void) { return 1; }

DYLEASE_PLUGIN("truncate-on-load", "")
DYLEASE_PASS("one", one)
