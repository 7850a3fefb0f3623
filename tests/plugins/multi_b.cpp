// Test plugin in C++, second translation unit: adds passes to the same plugin.
#include "dylease.h"

namespace {
int negate(int x) { return -x; }
struct Offset {
    int by;
};
Offset offset{100};
}  // namespace

extern "C" int add_offset(int x) { return x + offset.by; }

DYLEASE_PASS("negate", negate)
DYLEASE_PASS_WITH_DATA("add_offset", add_offset, &offset)
