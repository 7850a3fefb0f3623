/* Test plugin whose constructor waits on a latch the test holds: when DYLEASE_TEST_LATCH
 * names a FIFO, it opens it for reading (which waits until the test opens it for writing)
 * and reads until the test closes its end. The process that loads it (the check of
 * `dylease install`) is held there, at a point the test chooses, for as long as it lives;
 * when it ends, the test's end of the FIFO sees that no reader is left. It waits once per
 * process (the check loads a plugin twice): it unsets the variable. Without the variable it
 * is an ordinary plugin, of version LATCH_VERSION (-DLATCH_VERSION='"2.0.0"'; "1.0.0"). */
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include "dylease.h"

#ifndef LATCH_VERSION
#define LATCH_VERSION "1.0.0"
#endif

__attribute__((constructor)) static void wait_on_latch(void) {
    const char *latch = getenv("DYLEASE_TEST_LATCH");
    if (latch == 0) return;
    int fd = open(latch, O_RDONLY | O_CLOEXEC);
    unsetenv("DYLEASE_TEST_LATCH");
    if (fd < 0) return;
    char buffer[64];
    while (read(fd, buffer, sizeof buffer) > 0) {
    }
    close(fd);
}

static int answer(void) { return 42; }

DYLEASE_PLUGIN("latch", LATCH_VERSION)
DYLEASE_PASS("answer", answer)
