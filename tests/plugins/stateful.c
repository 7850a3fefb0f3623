/* Test plugin with state of its own, as a real plugin has: heap state made at the first
 * registration in a mapping, freed in on_unload, and a pass that reads it. If one user's
 * unload frees the state while another still uses the plugin, `read_state` sees it torn down.
 * It counts, into memory the test owns (so the counts outlive the library), set-ups,
 * tear-downs and reads of torn-down state. Written by hand against the ABI v1 layout. */
#include <stdlib.h>
#include "dylease.h"

typedef struct stateful_counters {
    int setups;     /* states made (one per mapping, at its first registration) */
    int teardowns;  /* on_unload calls */
    int torn_reads; /* read_state calls that found no state */
} stateful_counters;

#define SEQ __ATOMIC_SEQ_CST
#define MAGIC 42

static int *state;
static stateful_counters *counters; /* set by `attach` */
static int pending_setups;           /* set-ups made before `attach` told where to count */

static void count(int *field, int n) {
    stateful_counters *c = __atomic_load_n(&counters, SEQ);
    if (c) __atomic_fetch_add(field == &pending_setups ? &c->setups : field, n, SEQ);
    else if (field == &pending_setups) __atomic_fetch_add(&pending_setups, n, SEQ);
}

/* Tells the plugin where to count; the first call in a mapping moves the pending set-ups. */
static void attach(stateful_counters *c) {
    stateful_counters *none = 0;
    if (__atomic_compare_exchange_n(&counters, &none, c, 0, SEQ, SEQ))
        __atomic_fetch_add(&c->setups, __atomic_exchange_n(&pending_setups, 0, SEQ), SEQ);
}

static int read_state(void) {
    int *s = __atomic_load_n(&state, SEQ);
    if (!s) {
        stateful_counters *c = __atomic_load_n(&counters, SEQ);
        if (c) __atomic_fetch_add(&c->torn_reads, 1, SEQ);
        return -1;
    }
    return *s;
}

static int32_t register_passes(const dylease_host_api *api, dylease_registrar *reg) {
    if (!__atomic_load_n(&state, SEQ)) {
        int *fresh = malloc(sizeof *fresh), *none = 0;
        if (!fresh) return -1;
        *fresh = MAGIC;
        if (__atomic_compare_exchange_n(&state, &none, fresh, 0, SEQ, SEQ)) count(&pending_setups, 1);
        else free(fresh);
    }
    if (api->add_pass(reg, "attach", (dylease_fn)attach, 0) != 0) return -1;
    if (api->add_pass(reg, "read_state", (dylease_fn)read_state, 0) != 0) return -1;
    return 0;
}

static void on_unload(void) {
    stateful_counters *c = __atomic_load_n(&counters, SEQ);
    int *s = __atomic_exchange_n(&state, 0, SEQ);
    if (c) __atomic_fetch_add(&c->teardowns, 1, SEQ);
    if (s) {
        *s = 0;
        free(s);
    }
}

static const dylease_plugin descriptor = {1, "stateful", "1", register_passes, on_unload};

DYLEASE_EXPORT const dylease_plugin *dylease_plugin_v1(void) { return &descriptor; }
