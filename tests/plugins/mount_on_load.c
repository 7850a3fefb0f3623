/* Test plugin that plays the other side of a race with a mount, as root could: its
 * constructor bind-mounts the file "../b/libb.so" (relative to its own directory: another
 * file system) over "libb.so" in its own directory. Loaded before libb.so (file names in byte
 * order), so the swap lands after every file of the load was checked. */
#include "events.h"
#include <sys/mount.h>
#include "dylease.h"

__attribute__((constructor)) static void bind(void) {
    char dir[4096], from[4200], to[4200];
    self_path((void *)bind, dir, sizeof dir);
    char *slash = strrchr(dir, '/');
    if (!slash) return;
    *slash = '\0';
    snprintf(from, sizeof from, "%s/../b/libb.so", dir);
    snprintf(to, sizeof to, "%s/libb.so", dir);
    mount(from, to, NULL, MS_BIND, NULL);
}

static int one(void) { return 1; }

DYLEASE_PLUGIN("mount-on-load", "")
DYLEASE_PASS("one", one)
