/* Example plugin in C: a layout pass. */
#include "dylease.h"
#include "graph.h"

static void nchw_to_nhwc(demo_graph *g) { g->rewrites += 1; }

DYLEASE_PLUGIN("layout", "0.3.1")
DYLEASE_PASS("nchw_to_nhwc", nchw_to_nhwc)
