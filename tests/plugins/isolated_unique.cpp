// A C++ plugin that glibc never unloads in-process: its inline function's local static is a
// GNU unique symbol (built without dylease.map, so the symbol stays exported). One message
// pass, "greet", answers the static's text. (tests/integration/isolated.rs)
#include <cstddef>
#include <cstdint>
#include <string>

#include "dylease.h"

inline std::string &greeting() {
    static std::string text("hello from a unique symbol");
    return text;
}

static int32_t greet(const uint8_t *, size_t, dylease_out *out, void *) {
    const std::string &text = greeting();
    return out->write(out, reinterpret_cast<const uint8_t *>(text.data()), text.size()) == 0 ? 0 : 1;
}

DYLEASE_PLUGIN("unique", "1.0")
DYLEASE_MESSAGE_PASS("greet", greet)
