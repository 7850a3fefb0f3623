// Example plugin in C++, first translation unit: defines the plugin, its unload function and
// one pass. The same header and macros as the C plugin; DYLEASE_PLUGIN stands once per plugin,
// at global scope.
#include <cstdio>

#include "dylease.h"
#include "graph.h"

namespace {
void nchw_to_nhwc(demo_graph *g) { g->rewrites += 1; }

void on_unload() {
    std::printf("             [layout plugin, C++] on_unload\n");
    std::fflush(stdout);
}
}  // namespace

DYLEASE_PLUGIN_WITH_UNLOAD("layout", "0.3.1", on_unload)
DYLEASE_TYPED_PASS("nchw_to_nhwc", "demo.graph_pass/1", nchw_to_nhwc)
