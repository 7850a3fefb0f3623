/* Every macro of dylease.h in one plugin, for the header's strict-compile test
 * (tests/integration/header.rs): built as C99 with -Wpedantic -Wextra, and through macros.cpp
 * as C++11 with -Wold-style-cast -Wzero-as-null-pointer-constant too. Flags:
 *   -DPLAIN    uses DYLEASE_PLUGIN
 *   -DUNLOAD   uses DYLEASE_PLUGIN_WITH_UNLOAD
 *   otherwise  uses DYLEASE_PLUGIN_WITH_HOOKS
 *   -DFAILING  its second DYLEASE_REGISTER_CHECK fails with "no NPU device found" */
#include "dylease.h"

static int twice(int x) { return 2 * x; }
static int data = 5;

#if defined(PLAIN)
DYLEASE_PLUGIN("macros", "1.2.3")
#elif defined(UNLOAD)
static void on_unload(void) {}
DYLEASE_PLUGIN_WITH_UNLOAD("macros", "1.2.3", on_unload)
#else
static int32_t on_load(void) { return 0; }
static void on_unload(void) {}
DYLEASE_PLUGIN_WITH_HOOKS("macros", "1.2.3", on_load, on_unload)
#endif

DYLEASE_PASS("pass", twice)
DYLEASE_PASS_WITH_DATA("pass_with_data", twice, &data)
DYLEASE_TYPED_PASS("typed_pass", "test.int_op/1", twice)
DYLEASE_TYPED_PASS_WITH_DATA("typed_pass_with_data", "test.int_op/1", twice, &data)

/* Two checks: the first always passes, the second fails under -DFAILING. */
static const char *always_fine(void) { return DYLEASE_NULL_; }
static const char *npu_present(void) {
#if defined(FAILING)
    return "no NPU device found";
#else
    return DYLEASE_NULL_;
#endif
}
DYLEASE_REGISTER_CHECK(always_fine)
DYLEASE_REGISTER_CHECK(npu_present)
