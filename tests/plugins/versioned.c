/* Test plugin whose pass returns the version it was built as (-DVERSION=n, 1..=31), for the
 * reload tests. It counts, into memory the test owns (`attach`), how many instances of each
 * version were loaded and unloaded: on_load and on_unload, once per instance. */
#include "dylease.h"

#ifndef VERSION
#define VERSION 1
#endif
#define SEQ __ATOMIC_SEQ_CST

typedef struct versioned_counters {
    int loads[32];
    int unloads[32];
} versioned_counters;

static versioned_counters *counters;
static int loaded; /* on_load ran in this instance, and no on_unload yet */

static int32_t on_load(void) {
    if (__atomic_exchange_n(&loaded, 1, SEQ)) return -1; /* twice on one instance */
    return 0;
}

static void on_unload(void) {
    versioned_counters *c = __atomic_load_n(&counters, SEQ);
    __atomic_store_n(&loaded, 0, SEQ);
    if (c) __atomic_fetch_add(&c->unloads[VERSION], 1, SEQ);
    __atomic_store_n(&counters, 0, SEQ);
}

/* The first attach of an instance counts its load. */
static void attach(versioned_counters *c) {
    versioned_counters *none = 0;
    if (__atomic_compare_exchange_n(&counters, &none, c, 0, SEQ, SEQ)) __atomic_fetch_add(&c->loads[VERSION], 1, SEQ);
}

static int version(void) { return __atomic_load_n(&loaded, SEQ) ? VERSION : -VERSION; }

DYLEASE_PLUGIN_WITH_HOOKS("versioned", "", on_load, on_unload)
DYLEASE_PASS("attach", attach)
DYLEASE_PASS("version", version)
