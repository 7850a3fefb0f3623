/* Typed-pass test plugin, second translation unit (see typed_a.c): two more passes of
 * "test.int_op/1", one of them with user data. */
#include "dylease.h"

static int triple(int x) { return x * 3; }
static int square(int x) { return x * x; }
static int data = 7;

DYLEASE_TYPED_PASS("mid", "test.int_op/1", triple)
DYLEASE_TYPED_PASS_WITH_DATA("Beta", "test.int_op/1", square, &data)
