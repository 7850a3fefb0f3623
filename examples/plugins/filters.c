/* Example plugin in C for isolated sets: two message passes (bytes in, bytes out), one healthy
 * and one that crashes, as an untrusted plugin might. The demo loads it in an isolated host,
 * whose worker process takes the crash; the same file serves an ordinary host, where the
 * crash would end the program. */
#include <stdint.h>

#include "dylease.h"

/* Answers its input in upper case. */
static int32_t shout(const uint8_t *in, size_t len, dylease_out *out, void *data) {
    uint8_t buffer[256];
    size_t i;
    (void)data;
    if (len > sizeof buffer) return 2;
    for (i = 0; i < len; i++) buffer[i] = (uint8_t)(in[i] >= 'a' && in[i] <= 'z' ? in[i] - 'a' + 'A' : in[i]);
    return out->write(out, buffer, len) == 0 ? 0 : 1;
}

/* A bug: writes through a NULL pointer (SIGSEGV). */
static int32_t crash(const uint8_t *in, size_t len, dylease_out *out, void *data) {
    (void)in, (void)len, (void)out, (void)data;
    *(volatile int *)0 = 1;
    return 0;
}

DYLEASE_PLUGIN("filters", "1.0.0")
DYLEASE_MESSAGE_PASS("shout", shout)
DYLEASE_MESSAGE_PASS("crash", crash)
