/* Test fixture: a valid shared library that is not a dylease plugin (no dylease_plugin_v1). */
int not_a_plugin(void) { return 0; }
