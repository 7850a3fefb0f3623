/* A plugin exactly as it was written for ABI version 1: built against dylease_v1.h, a copy of
 * the version-1 header, whose register_passes refuses any host table whose abi_version is not
 * 1. Its on_unload logs itself (see events.h). */
#include "events.h"
#include "dylease_v1.h"

static int eleven(void) { return 11; }
static void on_unload(void) { log_event("on_unload"); }

DYLEASE_PLUGIN_WITH_UNLOAD("old", "1.0.0", on_unload)
DYLEASE_PASS("eleven", eleven)
