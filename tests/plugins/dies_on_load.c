/* Test plugin whose constructor ends the process that loads it, as a plugin that aborts (or a
 * file that makes the platform loader give up, which exits with status 127) would: with
 * -DEXIT_STATUS=N it calls _exit(N), otherwise abort(). A valid plugin otherwise, so that
 * nothing refuses it before the loader maps it. */
#include <stdlib.h>
#include <unistd.h>

#include "dylease.h"

__attribute__((constructor)) static void die(void) {
#ifdef EXIT_STATUS
    _exit(EXIT_STATUS);
#else
    abort();
#endif
}

static int answer(void) { return 42; }

DYLEASE_PLUGIN("dies_on_load", "")
DYLEASE_PASS("answer", answer)
