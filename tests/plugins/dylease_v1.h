/*
 * dylease_v1.h: a verbatim copy of include/dylease.h as it was for ABI version 1, kept so the
 * tests can build plugins exactly as their authors did before version 2 (see
 * tests/plugins/v1_plugin.c). Do not update it.
 *
 * dylease.h: the dylease plugin ABI, version 1 (normative copy).
 *
 * A plugin is a shared library that exports one function, dylease_plugin_v1, returning a
 * pointer to a static descriptor. The host opens the library with RTLD_NOW | RTLD_LOCAL,
 * checks the descriptor, then calls register_passes once per load; a plugin that is loaded,
 * unloaded and loaded again is asked to register again each time.
 *
 * Two ways to write a plugin:
 *
 *  1. Declaratively (C or C++, GCC or Clang):
 *
 *         #include "dylease.h"
 *         static int double_it(int x) { return 2 * x; }
 *         DYLEASE_PLUGIN("math", "1.0.0")
 *         DYLEASE_PASS("double", double_it)
 *
 *     DYLEASE_PLUGIN appears once per plugin; DYLEASE_PASS may appear in any translation
 *     unit of it. The static constructors these macros emit only link nodes into a list that
 *     is private to the plugin (hidden visibility); no constructor ever calls into the host.
 *     register_passes walks that list. Use DYLEASE_PLUGIN_WITH_UNLOAD to also give an
 *     on_unload function.
 *
 *  2. By hand: define dylease_plugin_v1 and fill a dylease_plugin yourself.
 *
 * Contract with the host:
 *  - name: NUL-terminated UTF-8, non-empty. version: NUL-terminated UTF-8, may be empty.
 *    Plugin, version and pass names are at most 256 bytes long.
 *  - register_passes returns 0 on success. On failure it undoes its own work: on_unload is
 *    called only after a successful register_passes.
 *  - The registrar pointer is valid only during register_passes, on the calling thread; the
 *    host refuses add_pass calls made outside a registration on that thread.
 *  - add_pass copies the name; the function and user_data must stay valid until on_unload.
 *    user_data must be usable from any thread. add_pass returns 0 when the pass was added
 *    and a negative value when it was refused (NULL, empty or too long name, name not UTF-8,
 *    NULL function, name already used by this plugin); a refusal fails the plugin's load even if
 *    register_passes ignores it.
 *  - on_unload (may be NULL) runs once per successful load, after the last lease is dropped
 *    and before the library is closed.
 */
#ifndef DYLEASE_H
#define DYLEASE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DYLEASE_ABI_VERSION 1u

typedef struct dylease_registrar dylease_registrar; /* opaque; valid only during register_passes */
typedef void (*dylease_fn)(void);                   /* any function; the host casts it back */

typedef struct dylease_host_api {
    uint32_t abi_version; /* the host's DYLEASE_ABI_VERSION */
    int32_t (*add_pass)(dylease_registrar *reg, const char *name, dylease_fn func, void *user_data);
} dylease_host_api; /* add_pass: 0 = added, negative = refused */

typedef struct dylease_plugin {
    uint32_t abi_version; /* DYLEASE_ABI_VERSION the plugin was built for */
    const char *name;     /* NUL-terminated UTF-8, non-empty */
    const char *version;  /* NUL-terminated UTF-8, may be empty */
    int32_t (*register_passes)(const dylease_host_api *api, dylease_registrar *reg); /* 0 = ok */
    void (*on_unload)(void); /* may be NULL; once per unload, before close */
} dylease_plugin;

#if defined(_WIN32)
#define DYLEASE_EXPORT __declspec(dllexport)
#define DYLEASE_HIDDEN
#else
#define DYLEASE_EXPORT __attribute__((visibility("default")))
#define DYLEASE_HIDDEN __attribute__((visibility("hidden")))
#endif

/* The entry point every plugin exports. */
DYLEASE_EXPORT const dylease_plugin *dylease_plugin_v1(void);

/* ---- Declarative registration (GCC and Clang) ---------------------------------------- */
/*
 * DYLEASE_PLUGIN must stand once, at global scope (in C++, outside any namespace).
 * DYLEASE_PASS may stand anywhere a declaration may, in any translation unit of the plugin,
 * but each one must be expanded in exactly one translation unit: a DYLEASE_PASS in a header
 * included by two source files registers the pass twice, and the host refuses the plugin.
 * If the plugin is linked from a static archive (.a), link it with -Wl,--whole-archive:
 * otherwise the linker drops objects nothing refers to, and their passes with them.
 */

/* One node per DYLEASE_PASS, linked by a constructor into the plugin's private list. */
typedef struct dylease_pass_node {
    const char *name;
    dylease_fn func;
    void *user_data;
    struct dylease_pass_node *next;
} dylease_pass_node;

/* The plugin's private list of passes (defined by DYLEASE_PLUGIN, hidden from other modules). */
extern DYLEASE_HIDDEN dylease_pass_node *dylease_pass_list_head;
extern DYLEASE_HIDDEN dylease_pass_node **dylease_pass_list_tail;

#ifdef __cplusplus
#define DYLEASE_NULL_ nullptr
#define DYLEASE_FN_CAST_(f) reinterpret_cast<dylease_fn>(f)
#define DYLEASE_DATA_CAST_(d) const_cast<void *>(static_cast<const void *>(d))
/* Fails to compile inside a namespace: ::dylease_scope_probe_ would not be declared. */
#define DYLEASE_AT_GLOBAL_SCOPE_                                                              \
    struct dylease_scope_probe_;                                                              \
    typedef ::dylease_scope_probe_ dylease_plugin_must_be_defined_at_global_scope_;
#else
#define DYLEASE_NULL_ 0
#define DYLEASE_FN_CAST_(f) ((dylease_fn)(f))
#define DYLEASE_DATA_CAST_(d) ((void *)(d))
#define DYLEASE_AT_GLOBAL_SCOPE_
#endif

#define DYLEASE_CAT_(a, b) a##b
#define DYLEASE_CAT(a, b) DYLEASE_CAT_(a, b)

/* `id` is a number from __COUNTER__, unique in the translation unit. */
#define DYLEASE_PASS_AT_(pass_name, pass_fn, pass_data, id)                                   \
    static dylease_pass_node DYLEASE_CAT(dylease_pass_node_, id) = {                          \
        pass_name, DYLEASE_FN_CAST_(pass_fn), DYLEASE_DATA_CAST_(pass_data), DYLEASE_NULL_};  \
    __attribute__((constructor)) static void DYLEASE_CAT(dylease_pass_link_, id)(void) {      \
        *dylease_pass_list_tail = &DYLEASE_CAT(dylease_pass_node_, id);                       \
        dylease_pass_list_tail = &DYLEASE_CAT(dylease_pass_node_, id).next;                   \
    }
#define DYLEASE_PASS_AT(pass_name, pass_fn, pass_data, id) DYLEASE_PASS_AT_(pass_name, pass_fn, pass_data, id)

/* Registers `pass_fn` (any function) under `pass_name` (a string literal) with `pass_data`. */
#define DYLEASE_PASS_WITH_DATA(pass_name, pass_fn, pass_data) \
    DYLEASE_PASS_AT(pass_name, pass_fn, pass_data, __COUNTER__)

/* Registers `pass_fn` (any function) under `pass_name` (a string literal). */
#define DYLEASE_PASS(pass_name, pass_fn) DYLEASE_PASS_WITH_DATA(pass_name, pass_fn, DYLEASE_NULL_)

/* Defines the plugin: its descriptor, entry point and register_passes. Once per plugin, at
 * global scope. `unload_fn` is a `void (*)(void)`, or NULL (nullptr in C++). */
#define DYLEASE_PLUGIN_WITH_UNLOAD(plugin_name, plugin_version, unload_fn)                     \
    DYLEASE_AT_GLOBAL_SCOPE_                                                                  \
    DYLEASE_HIDDEN dylease_pass_node *dylease_pass_list_head = DYLEASE_NULL_;                 \
    DYLEASE_HIDDEN dylease_pass_node **dylease_pass_list_tail = &dylease_pass_list_head;      \
    static int32_t dylease_register_passes(const dylease_host_api *api, dylease_registrar *reg) { \
        const dylease_pass_node *node;                                                        \
        if (api == DYLEASE_NULL_ || api->abi_version != DYLEASE_ABI_VERSION) return -1;       \
        for (node = dylease_pass_list_head; node != DYLEASE_NULL_; node = node->next) {       \
            if (api->add_pass(reg, node->name, node->func, node->user_data) != 0) return -1;  \
        }                                                                                     \
        return 0;                                                                             \
    }                                                                                         \
    static const dylease_plugin dylease_descriptor = {                                        \
        DYLEASE_ABI_VERSION, plugin_name, plugin_version, dylease_register_passes, unload_fn}; \
    DYLEASE_EXPORT const dylease_plugin *dylease_plugin_v1(void) { return &dylease_descriptor; }

#define DYLEASE_PLUGIN(plugin_name, plugin_version) DYLEASE_PLUGIN_WITH_UNLOAD(plugin_name, plugin_version, DYLEASE_NULL_)

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* DYLEASE_H */
