/* Test plugin that needs libdep.so (tests/plugins/dep.c): its pass returns dep_value(), so the
 * copy of the dependency the loader found shows in the result.
 *   -DDEFINE_PLUGIN_SIDE  defines plugin_side(), which dep_under_linked.c needs */
#include "dylease.h"

int dep_value(void);

#ifdef DEFINE_PLUGIN_SIDE
/* What an under-linked dependency (dep_under_linked.c) calls back. */
int plugin_side(void);
int plugin_side(void) { return 11; }
#endif
static int value(void) { return dep_value(); }

DYLEASE_PLUGIN("uses-dep", "0.1")
DYLEASE_PASS("dep_value", value)
