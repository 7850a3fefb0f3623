/* Typed-pass test plugin, first translation unit: the plugin, two passes of interface
 * "test.int_op/1" (`int (*)(int)`), one untyped pass and one pass of another interface.
 * Built with typed_b.c in both link orders (fixtures typed_ab and typed_ba). */
#include "dylease.h"

static int times_ten(int x) { return x * 10; }
static int plus_one(int x) { return x + 1; }
static int untyped(int x) { return x - 1; }
static int other(int x) { return -x; }

DYLEASE_PLUGIN("typed-two-units", "1.0")
DYLEASE_TYPED_PASS("zeta", "test.int_op/1", times_ten)
DYLEASE_TYPED_PASS("alpha", "test.int_op/1", plus_one)
DYLEASE_PASS("untyped", untyped)
DYLEASE_TYPED_PASS("negate", "test.other_op/1", other)
