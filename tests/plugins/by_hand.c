/* Test plugin written without the header's macros: a hand-filled descriptor whose ABI
 * version comes from -DABI=... */
#include "dylease.h"

static int seven(void) { return 7; }

static int32_t register_passes(const dylease_host_api *api, dylease_registrar *reg) {
    return api->add_pass(reg, "seven", (dylease_fn)seven, 0);
}

static const dylease_plugin descriptor = {ABI, "by-hand", "1", register_passes, 0};

const dylease_plugin *dylease_plugin_v1(void) { return &descriptor; }
