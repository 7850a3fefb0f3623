/* The toy graph the example passes rewrite; the demo host declares the same layout. */
#ifndef DEMO_GRAPH_H
#define DEMO_GRAPH_H
typedef struct demo_graph {
    int nodes;
    int rewrites;
} demo_graph;
#endif
