/* The toy graph the example passes rewrite. The demo host (examples/demo.rs) and the Rust
 * plugin (examples/rust-plugin) declare the same layout; every example pass has the type
 * void (*)(demo_graph *). */
#ifndef DEMO_GRAPH_H
#define DEMO_GRAPH_H
typedef struct demo_graph {
    int nodes;
    int rewrites;
} demo_graph;
#endif
