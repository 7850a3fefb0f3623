/* Test plugin: arithmetic passes and an on_unload that counts into a host-owned counter. */
#include "dylease.h"

static int *unload_counter;

static int double_it(int x) { return 2 * x; }
static int add_one(int x) { return x + 1; }
/* The host hands the plugin a counter; on_unload increments it. The counter lives in the
 * host, so it can be read after this library is gone. */
static void set_unload_counter(int *counter) { unload_counter = counter; }

static void on_unload(void) {
    if (unload_counter) __atomic_fetch_add(unload_counter, 1, __ATOMIC_SEQ_CST);
}

DYLEASE_PLUGIN_WITH_UNLOAD("arith", "1.2.3", on_unload)
DYLEASE_PASS("double", double_it)
DYLEASE_PASS("add_one", add_one)
DYLEASE_PASS("set_unload_counter", set_unload_counter)
