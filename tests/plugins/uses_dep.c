/* Test plugin that needs libdep.so (tests/plugins/dep.c): its pass returns dep_value(), so the
 * copy of the dependency the loader found shows in the result.
 *   -DDEFINE_PLUGIN_SIDE  defines plugin_side(), which dep_under_linked.c needs
 *   -DMESSAGE_PASS        adds the message pass "dep_value_message" (the value in decimal),
 *                         which an isolated set can call */
#include "dylease.h"

int dep_value(void);

#ifdef DEFINE_PLUGIN_SIDE
/* What an under-linked dependency (dep_under_linked.c) calls back. */
int plugin_side(void);
int plugin_side(void) { return 11; }
#endif
static int value(void) { return dep_value(); }

#ifdef MESSAGE_PASS
#include <stdio.h>
static int32_t value_message(const uint8_t *in, size_t len, dylease_out *out, void *data) {
    char text[16];
    int n = snprintf(text, sizeof text, "%d", dep_value());
    (void)in, (void)len, (void)data;
    return out->write(out, (const uint8_t *)text, (size_t)n) == 0 ? 0 : 1;
}
#endif

DYLEASE_PLUGIN("uses-dep", "0.1")
DYLEASE_PASS("dep_value", value)
#ifdef MESSAGE_PASS
DYLEASE_MESSAGE_PASS("dep_value_message", value_message)
#endif
