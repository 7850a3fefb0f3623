/* Test plugin whose on_load calls back into the host process, as plugin code that uses
 * dylease itself would: it reads the address of a function `int (*)(const char *dir)` from
 * the file "reenter.hook" next to it (written by the test) and returns what that function
 * returns for the plugin's own directory. */
#include "events.h"
#include <string.h>
#include "dylease.h"

static int32_t on_load(void) {
    char dir[4096], hook[4200];
    void *address = NULL;
    int (*call)(const char *);
    self_path((void *)on_load, dir, sizeof dir);
    char *slash = strrchr(dir, '/');
    if (!slash) return 1;
    *slash = '\0';
    snprintf(hook, sizeof hook, "%s/reenter.hook", dir);
    FILE *file = fopen(hook, "r");
    if (!file) return 1;
    int scanned = fscanf(file, "%p", &address);
    fclose(file);
    if (scanned != 1 || !address) return 1;
    memcpy(&call, &address, sizeof call);
    return call(dir);
}

static int one(void) { return 1; }

DYLEASE_PLUGIN_WITH_HOOKS("reenter", "", on_load, NULL)
DYLEASE_PASS("one", one)
