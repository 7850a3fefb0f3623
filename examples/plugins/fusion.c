/* Example plugin in C: graph-rewriting passes registered with the header's macros. */
#include <stdio.h>

#include "dylease.h"
#include "graph.h"

static void fuse_conv_relu(demo_graph *g) {
    int fused = g->nodes / 4;
    g->nodes -= fused;
    g->rewrites += fused;
}

static void drop_identity(demo_graph *g) {
    if (g->nodes > 1) {
        g->nodes -= 1;
        g->rewrites += 1;
    }
}

static void on_unload(void) {
    printf("             [fusion plugin, C] on_unload\n");
    fflush(stdout);
}

DYLEASE_PLUGIN_WITH_UNLOAD("fusion", "1.0.0", on_unload)
DYLEASE_TYPED_PASS("fuse_conv_relu", "demo.graph_pass/1", fuse_conv_relu)
DYLEASE_TYPED_PASS("drop_identity", "demo.graph_pass/1", drop_identity)
