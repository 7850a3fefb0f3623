/* Test dependency that is under-linked: it calls `plugin_side`, which only the plugin that
 * needs it defines (built without `-Wl,-z,defs`, the link succeeds). The loader cannot map it
 * on its own with RTLD_NOW. */
int plugin_side(void);
int dep_value(void);
int dep_value(void) { return plugin_side(); }
