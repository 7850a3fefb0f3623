/* Test plugin built several times with -DPLUGIN_NAME="..." and -DPASS_NAME="...".
 *   -DMESSAGE_PASS="..."  adds a message pass of that name that answers its input */
#include "dylease.h"

static int identity(int x) { return x; }

#ifdef MESSAGE_PASS
static int32_t answer(const uint8_t *in, size_t len, dylease_out *out, void *data) {
    (void)data;
    return out->write(out, in, len) == 0 ? 0 : 1;
}
#endif

DYLEASE_PLUGIN(PLUGIN_NAME, "0.1")
DYLEASE_PASS(PASS_NAME, identity)
#ifdef MESSAGE_PASS
DYLEASE_MESSAGE_PASS(MESSAGE_PASS, answer)
#endif
