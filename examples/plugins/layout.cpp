// Example plugin in C++, first translation unit: defines the plugin, its hooks and one pass.
// The same header and macros as the C plugin; DYLEASE_PLUGIN stands once per plugin, at global
// scope. It uses what real C++ pass libraries use: a function-local static singleton holding a
// std::string, a thread_local with a destructor, and an exception thrown and caught inside.
//
// Build it with the recipe (CMake: `dylease_add_plugin`; by hand: -fPIC, hidden visibility and
// the version script include/dylease.map). Without the version script, g++ exports the
// singleton's static as a GNU unique symbol and glibc never unloads the library.
#include <cstdio>
#include <stdexcept>
#include <string>

#include "dylease.h"
#include "graph.h"

namespace layout {
// The "Meyers singleton" of every C++ pass registry: one instance, made on first use.
struct Registry {
    std::string preferred = "NHWC";
    int conversions = 0;

    static Registry &get() {
        static Registry instance;
        return instance;
    }
};

// A scratch buffer per thread, freed when the thread ends. A library whose thread-locals have
// destructors stays mapped while a thread that used them is alive: run its passes on threads
// that end before the last lease drops (the demo's components do).
thread_local std::string scratch;

int parse_dims(const std::string &text) {
    if (text.size() != 4) throw std::invalid_argument("a layout has four dimensions: " + text);
    return static_cast<int>(text.size());
}
}  // namespace layout

namespace {
void nchw_to_nhwc(demo_graph *g) {
    layout::scratch = layout::Registry::get().preferred;
    // An exception thrown and caught inside the plugin: it never crosses the C ABI.
    try {
        layout::parse_dims("NCHW-bad");
    } catch (const std::invalid_argument &) {
        layout::scratch += "!";
    }
    layout::Registry::get().conversions += layout::parse_dims(layout::Registry::get().preferred) / 4;
    g->rewrites += 1;
}

int32_t on_load() {
    layout::Registry::get().conversions = 0;
    std::printf("             [layout plugin, C++] on_load (preferred layout %s)\n",
                layout::Registry::get().preferred.c_str());
    std::fflush(stdout);
    return 0;
}

void on_unload() {
    std::printf("             [layout plugin, C++] on_unload after %d conversions\n",
                layout::Registry::get().conversions);
    std::fflush(stdout);
}

// How many conversions this instance made: for the tests (`int (*)(void)`).
int conversions() { return layout::Registry::get().conversions; }
}  // namespace

DYLEASE_PLUGIN_WITH_HOOKS("layout", "0.4.0", on_load, on_unload)
DYLEASE_TYPED_PASS("nchw_to_nhwc", "demo.graph_pass/1", nchw_to_nhwc)
DYLEASE_PASS("conversions", conversions)
