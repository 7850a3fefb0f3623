/* Test plugin for the churn test. It counts, into memory the host owns (so the counts survive
 * the library), how many mappings of it were used, how many times it was unloaded, and how
 * many times a pass ran after this mapping's on_unload: a use of an unloaded library. */
#include "dylease.h"

typedef struct churn_counters {
    int loads;          /* mappings whose first `attach` came from the host */
    int unloads;        /* on_unload calls */
    int late_calls;     /* `work` calls after on_unload in the same mapping */
    int double_unloads; /* on_unload calls after the first in the same mapping */
} churn_counters;

/* Fresh (NULL, 0) in every new mapping of the library. */
static churn_counters *counters;
static int unloaded;

/* Every lease calls attach; the first call in a mapping counts the mapping. */
static void attach(churn_counters *host) {
    churn_counters *none = 0;
    if (__atomic_compare_exchange_n(&counters, &none, host, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
        __atomic_fetch_add(&host->loads, 1, __ATOMIC_SEQ_CST);
}

static int work(int x) {
    churn_counters *c = __atomic_load_n(&counters, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&unloaded, __ATOMIC_SEQ_CST) && c) __atomic_fetch_add(&c->late_calls, 1, __ATOMIC_SEQ_CST);
    return x + 1;
}

static void on_unload(void) {
    churn_counters *c = __atomic_load_n(&counters, __ATOMIC_SEQ_CST);
    if (!c) return;
    if (__atomic_exchange_n(&unloaded, 1, __ATOMIC_SEQ_CST)) __atomic_fetch_add(&c->double_unloads, 1, __ATOMIC_SEQ_CST);
    __atomic_fetch_add(&c->unloads, 1, __ATOMIC_SEQ_CST);
}

DYLEASE_PLUGIN_WITH_UNLOAD("churn", "1", on_unload)
DYLEASE_PASS("attach", attach)
DYLEASE_PASS("work", work)
