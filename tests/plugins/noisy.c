/* Test plugin: prints to standard output from its constructor (through C's stdio buffer,
 * without flushing) and from on_unload (straight to file descriptor 1), as a careless plugin
 * might. `dylease check --json` must keep all of it out of the JSON document. */
#include <stdio.h>
#include <unistd.h>

#include "dylease.h"

__attribute__((constructor)) static void hello(void) { printf("noisy: constructor ran\n"); }

static void goodbye(void) {
    static const char text[] = "noisy: on_unload ran\n";
    (void)!write(1, text, sizeof text - 1);
}

static int four(void) { return 4; }

DYLEASE_PLUGIN_WITH_UNLOAD("noisy", "0.9", goodbye)
DYLEASE_PASS("four", four)
