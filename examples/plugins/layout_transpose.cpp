// Example plugin in C++, second translation unit: adds a pass to the plugin defined in
// layout.cpp. DYLEASE_TYPED_PASS may stand in any source file of the plugin; each one is expanded in
// exactly one translation unit.
#include <algorithm>

#include "dylease.h"
#include "graph.h"

namespace {
// Per-pass state handed to the host as the pass's user data.
struct TransposePolicy {
    int max_removed;
};
const TransposePolicy policy{2};

void cancel_transposes(demo_graph *g) {
    int removed = std::min(g->nodes / 2, policy.max_removed);
    g->nodes -= removed;
    g->rewrites += removed;
}
}  // namespace

DYLEASE_TYPED_PASS_WITH_DATA("cancel_transposes", "demo.graph_pass/1", cancel_transposes, &policy)
