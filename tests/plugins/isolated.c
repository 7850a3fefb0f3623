/* The plugin of the isolated-set tests (tests/integration/isolated.rs): message passes that
 * answer, fail, crash, hang or wait, a pointer pass, and faults in its constructor or on_load
 * chosen at build time:
 *   -DABORT_IN_CONSTRUCTOR   a constructor calls abort()
 *   -DEXIT_IN_ON_LOAD        on_load calls exit(3)
 *   -DEXIT_IN_ON_UNLOAD      on_unload calls exit(5)
 * Message passes: "reverse" (its input reversed), "echo" (its input, of any size), "size" (the
 * length of its input, in decimal), "pid" (the process it runs in, in decimal),
 * "fail" (returns 7), "crash" (writes through a NULL pointer), "spin" (never returns), "mark"
 * (creates the file its input names, then never returns), "flood" (70 KiB of output: more than
 * a frame carries). Pointer pass: "double". */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dylease.h"

/* Never cleared: the loops below never end, as far as the plugin knows. */
static volatile int forever = 1;

static int32_t reverse(const uint8_t *in, size_t len, dylease_out *out, void *data) {
    uint8_t buffer[4096];
    size_t i;
    (void)data;
    if (len > sizeof buffer) return 2;
    for (i = 0; i < len; i++) buffer[i] = in[len - 1 - i];
    return out->write(out, buffer, len) == 0 ? 0 : 1;
}

static int32_t echo(const uint8_t *in, size_t len, dylease_out *out, void *data) {
    (void)data;
    return out->write(out, in, len) == 0 ? 0 : 1;
}

static int32_t size(const uint8_t *in, size_t len, dylease_out *out, void *data) {
    char text[32];
    int n = snprintf(text, sizeof text, "%zu", len);
    (void)in, (void)data;
    return out->write(out, (const uint8_t *)text, (size_t)n) == 0 ? 0 : 1;
}

static int32_t pid(const uint8_t *in, size_t len, dylease_out *out, void *data) {
    char text[32];
    int n = snprintf(text, sizeof text, "%ld", (long)getpid());
    (void)in, (void)len, (void)data;
    return out->write(out, (const uint8_t *)text, (size_t)n) == 0 ? 0 : 1;
}

static int32_t fail(const uint8_t *in, size_t len, dylease_out *out, void *data) {
    (void)in, (void)len, (void)out, (void)data;
    return 7;
}

static int32_t crash(const uint8_t *in, size_t len, dylease_out *out, void *data) {
    (void)in, (void)len, (void)out, (void)data;
    *(volatile int *)0 = 1;
    return 0;
}

static int32_t spin(const uint8_t *in, size_t len, dylease_out *out, void *data) {
    (void)in, (void)len, (void)out, (void)data;
    while (forever) sleep(1);
    return 0;
}

static int32_t mark(const uint8_t *in, size_t len, dylease_out *out, void *data) {
    char path[4096];
    (void)out, (void)data;
    if (len >= sizeof path) return 2;
    memcpy(path, in, len);
    path[len] = 0;
    close(open(path, O_CREAT | O_WRONLY, 0600));
    while (forever) sleep(1);
    return 0;
}

static int32_t flood(const uint8_t *in, size_t len, dylease_out *out, void *data) {
    static const uint8_t block[1024];
    int i;
    (void)in, (void)len, (void)data;
    for (i = 0; i < 70; i++) {
        if (out->write(out, block, sizeof block) != 0) return 5;
    }
    return 0;
}

static int double_it(int x) { return 2 * x; }

#ifdef ABORT_IN_CONSTRUCTOR
__attribute__((constructor)) static void constructor(void) { abort(); }
#endif

static int32_t on_load(void) {
#ifdef EXIT_IN_ON_LOAD
    exit(3);
#endif
    return 0;
}

#ifdef EXIT_IN_ON_UNLOAD
static void on_unload(void) { exit(5); }
#define ON_UNLOAD on_unload
#else
#define ON_UNLOAD DYLEASE_NULL_
#endif

DYLEASE_PLUGIN_WITH_HOOKS("isolated", "1.0", on_load, ON_UNLOAD)
DYLEASE_MESSAGE_PASS("reverse", reverse)
DYLEASE_MESSAGE_PASS("echo", echo)
DYLEASE_MESSAGE_PASS("size", size)
DYLEASE_MESSAGE_PASS("pid", pid)
DYLEASE_MESSAGE_PASS("fail", fail)
DYLEASE_MESSAGE_PASS("crash", crash)
DYLEASE_MESSAGE_PASS("spin", spin)
DYLEASE_MESSAGE_PASS("mark", mark)
DYLEASE_MESSAGE_PASS("flood", flood)
DYLEASE_PASS("double", double_it)
