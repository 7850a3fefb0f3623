# The demo's Python pass (with the `python` feature): one more rewrite of the graph, in the same
# leased sets as the C, C++ and Rust passes. The host hands it the graph's two counters.
import dylease

dylease.plugin("simplify", "1.0")


def on_load():
    print("                          simplify.py    on_load (once per instance, process-wide)")


def on_unload():
    print("                          simplify.py    on_unload (after the last set using it)")


@dylease.typed_pass("simplify_identity", "demo.graph_py_pass/1")
def simplify_identity(nodes, rewrites):
    # Removes one identity node if there is one to remove.
    if nodes > 0:
        return nodes - 1, rewrites + 1
    return nodes, rewrites
