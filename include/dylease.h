/*
 * dylease.h: the dylease plugin ABI, version 2 (normative copy).
 *
 * A plugin is a shared library that exports one function, dylease_plugin_v1, returning a
 * pointer to a static descriptor (the symbol names the entry convention, not the ABI
 * version). The host opens the library with RTLD_NOW | RTLD_LOCAL, checks the descriptor,
 * runs on_load once, then calls register_passes once per set of plugins it builds; a plugin
 * that is loaded, unloaded and loaded again is asked to register again each time.
 *
 * Two ways to write a plugin:
 *
 *  1. Declaratively (C or C++, GCC or Clang):
 *
 *         #include "dylease.h"
 *         static int double_it(int x) { return 2 * x; }
 *         static void fuse(void *graph) { ... }
 *         DYLEASE_PLUGIN("math", "1.0.0")
 *         DYLEASE_PASS("double", double_it)
 *         DYLEASE_TYPED_PASS("fuse", "ge.fusion_pass/1", fuse)
 *
 *     DYLEASE_PLUGIN appears once per plugin; DYLEASE_PASS and DYLEASE_TYPED_PASS may appear
 *     in any translation unit of it. The static constructors these macros emit only link
 *     nodes into a list that is private to the plugin (hidden visibility); no constructor ever
 *     calls into the host. register_passes walks that list. Use DYLEASE_PLUGIN_WITH_HOOKS to
 *     give on_load and on_unload functions (DYLEASE_PLUGIN_WITH_UNLOAD: on_unload only), and
 *     DYLEASE_REGISTER_CHECK to fail the registration with a message of your own:
 *
 *         static const char *npu_present(void) { return have_npu() ? NULL : "no NPU device found"; }
 *         DYLEASE_REGISTER_CHECK(npu_present)
 *
 *     DYLEASE_MESSAGE_PASS registers a pass that takes and returns bytes (dylease_message_fn):
 *     the one kind of pass a host can also call in an isolated set, where the plugin runs in
 *     a worker process that function pointers cannot reach:
 *
 *         static int32_t upper(const uint8_t *in, size_t len, dylease_out *out, void *data) {
 *             ... return out->write(out, bytes, n) == 0 ? 0 : 1;
 *         }
 *         DYLEASE_MESSAGE_PASS("upper", upper)
 *
 *     Link it with the version script dylease.map (next to this header), which keeps only
 *     dylease_plugin_v1 global: a C++ plugin without it is usually never unloaded by glibc.
 *
 *  2. By hand: define dylease_plugin_v1 and fill a dylease_plugin yourself. Add
 *     DYLEASE_MANIFEST(name, version) to give it a manifest (see below).
 *
 * Manifest: the macros also write what the plugin is into its file, as ELF notes of owner
 * "dylease" in a section .note.dylease, which linkers put into a PT_NOTE segment: a plugin
 * record (DYLEASE_PLUGIN*, DYLEASE_MANIFEST: the manifest format version 1, the ABI version,
 * the name and version) and one pass record per DYLEASE_PASS or DYLEASE_TYPED_PASS (name and
 * interface, empty when untyped). A reader of the file (dylease_elf::Elf::manifest in Rust;
 * `readelf -n` shows the notes) learns the plugin's passes without running any of its code.
 * The plugin record of DYLEASE_PLUGIN* says the pass list is complete: its register_passes
 * registers exactly the passes of those macros. DYLEASE_MANIFEST writes a record that says
 * it is not (a plugin registering by hand may add any pass). Every string is a literal; its
 * stored length counts the terminating NUL. `strip --strip-all` keeps the notes; a link step
 * that drops .note* sections (a linker script, `objcopy --remove-section`) leaves no
 * manifest. A host reads the manifest before it maps the file: it refuses an ABI version it
 * does not speak, or a corrupt manifest, before any code of the plugin runs (constructors
 * included); after register_passes, the descriptor's name and version must be the manifest's,
 * and with a complete list the passes registered exactly the ones declared (name and
 * interface), or the load fails naming each difference. Without a manifest, the descriptor
 * is read after the loader ran the plugin's constructors. Passes registered by hand from a
 * plugin that uses DYLEASE_PLUGIN* break that contract: use DYLEASE_MANIFEST instead.
 *
 * Contract with the host:
 *  - name: NUL-terminated UTF-8, non-empty. version: NUL-terminated UTF-8, may be empty.
 *    Plugin, version and pass names and interfaces are at most 256 bytes long.
 *  - The host accepts descriptors of abi_version 1 and 2 and reads only the fields of the
 *    plugin's version. It hands register_passes a host API table whose abi_version is the
 *    plugin's own: a version-2 plugin gets add_typed_pass and report, a version-1 plugin a
 *    table with abi_version 1 and add_pass only. A plugin calls add_typed_pass and report only
 *    when api->abi_version >= 2, and accepts any api->abi_version >= 1 (later versions only
 *    append fields).
 *  - on_load (version 2, may be NULL) runs once per loaded instance of the library, after it
 *    is opened and before the instance's first register_passes. It returns 0 on success; any
 *    other value fails the plugin's load, and then neither register_passes nor on_unload is
 *    called. Put state that on_unload frees here, not in a constructor: a library the
 *    platform keeps mapped (-z nodelete, a C++ thread_local, musl) runs its constructors only
 *    once, but on_load at every load.
 *  - register_passes returns 0 on success. Before failing it may call report to say why.
 *  - on_unload (may be NULL) runs once per loaded instance, before the library is closed.
 *    When the plugin has an on_load that succeeded, on_unload runs exactly once even if a
 *    later step fails (register_passes, a refused pass, a pass name another plugin took).
 *    Without an on_load (every version-1 plugin) a failing register_passes undoes its own
 *    work and on_unload is not called; it runs only after a successful register_passes.
 *  - The registrar pointer is valid only during register_passes, on the calling thread; the
 *    host refuses add_pass, add_typed_pass and report calls made outside a registration on
 *    that thread.
 *  - add_pass copies the name; the function and user_data must stay valid until on_unload.
 *    user_data must be usable from any thread. add_pass returns 0 when the pass was added
 *    and a negative value when it was refused (NULL, empty or too long name, name not UTF-8,
 *    NULL function, name already used by this plugin); a refusal fails the plugin's load even if
 *    register_passes ignores it.
 *  - add_typed_pass (version 2) is add_pass with an interface: the pass signature, named by a
 *    string hosts and plugins agree on, in the style of Qt's interface ids: UTF-8, 1 to 256
 *    bytes, by convention "domain.name/MAJOR" ("ge.fusion_pass/1"). It is refused, like a bad
 *    name, when the interface is NULL, empty, too long or not UTF-8. The host copies it.
 *  - report (version 2) gives the reason register_passes is about to fail: the host copies
 *    the NUL-terminated message (up to 1024 bytes of it, decoded as UTF-8 with invalid bytes
 *    replaced) and shows it in the load error, for example
 *        plugin file `.../libnpu.so` failed to register its passes: no NPU device found
 *        (`register_passes` returned -1)
 *    The first message of a registration is kept; later ones are ignored. A message from a
 *    register_passes that then succeeds is only logged.
 *
 * Upgrading a version-1 plugin: nothing is required; it loads unchanged. Rebuilt against this
 * header, a declarative plugin becomes version 2 with no source change.
 */
#ifndef DYLEASE_H
#define DYLEASE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DYLEASE_ABI_VERSION 2u

typedef struct dylease_registrar dylease_registrar; /* opaque; valid only during register_passes */
typedef void (*dylease_fn)(void);                   /* any function; the host casts it back */

typedef struct dylease_host_api {
    uint32_t abi_version; /* this table's version: the plugin's own, at most the host's */
    int32_t (*add_pass)(dylease_registrar *reg, const char *name, dylease_fn func, void *user_data);
    /* abi_version >= 2: */
    int32_t (*add_typed_pass)(dylease_registrar *reg, const char *name, const char *interface,
                              dylease_fn func, void *user_data);
    void (*report)(dylease_registrar *reg, const char *message); /* why register_passes fails */
} dylease_host_api; /* add_pass, add_typed_pass: 0 = added, negative = refused */

typedef struct dylease_plugin {
    uint32_t abi_version; /* DYLEASE_ABI_VERSION the plugin was built for: 1 or 2 */
    const char *name;     /* NUL-terminated UTF-8, non-empty */
    const char *version;  /* NUL-terminated UTF-8, may be empty */
    int32_t (*register_passes)(const dylease_host_api *api, dylease_registrar *reg); /* 0 = ok; once per set */
    void (*on_unload)(void); /* may be NULL; once per instance, before close */
    /* abi_version >= 2: */
    int32_t (*on_load)(void); /* may be NULL; once per instance, before its first register_passes; 0 = ok */
} dylease_plugin;

/* Message passes (interface DYLEASE_MESSAGE_INTERFACE): bytes in, bytes out. The one kind of
 * pass a host can call in a plugin running in another process (an isolated set); an ordinary
 * set calls the same pass directly. No ABI change: a message pass is a typed pass. */
#define DYLEASE_MESSAGE_INTERFACE "dylease.message/1"
/* Where a message pass appends its output: write(out, bytes, len) appends len bytes and
 * returns 0, non-zero when the host refuses them (the pass should then fail). Valid only
 * during the call that received it, on that thread. ctx is the host's. */
typedef struct dylease_out {
    void *ctx;
    int32_t (*write)(struct dylease_out *out, const uint8_t *bytes, size_t len);
} dylease_out;
/* A message pass: reads in_len bytes at in (NULL allowed when in_len is 0), appends its output
 * through out, returns 0 on success or a status of its own, which fails the call with it. */
typedef int32_t (*dylease_message_fn)(const uint8_t *in, size_t in_len, dylease_out *out, void *user_data);

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
 * DYLEASE_PASS and DYLEASE_TYPED_PASS may stand anywhere a declaration may, in any translation
 * unit of the plugin, but each one must be expanded in exactly one translation unit: a pass in a header
 * included by two source files registers the pass twice, and the host refuses the plugin.
 * If the plugin is linked from a static archive (.a), link it with -Wl,--whole-archive:
 * otherwise the linker drops objects nothing refers to, and their passes with them.
 */

/* One node per DYLEASE_PASS or DYLEASE_TYPED_PASS, linked by a constructor into the plugin's
 * private list. `interface` is NULL for an untyped pass. */
typedef struct dylease_pass_node {
    const char *name;
    const char *interface;
    dylease_fn func;
    void *user_data;
    struct dylease_pass_node *next;
} dylease_pass_node;

/* The plugin's private list of passes (defined by DYLEASE_PLUGIN, hidden from other modules). */
extern DYLEASE_HIDDEN dylease_pass_node *dylease_pass_list_head;
extern DYLEASE_HIDDEN dylease_pass_node **dylease_pass_list_tail;

/* A check that runs before the passes are registered: NULL if the plugin can register, else
 * the message that says why not (a string that stays valid until the check is called again). */
typedef const char *(*dylease_check_fn)(void);

/* One node per DYLEASE_REGISTER_CHECK, linked by a constructor into the plugin's private list. */
typedef struct dylease_check_node {
    dylease_check_fn check;
    struct dylease_check_node *next;
} dylease_check_node;

/* The plugin's private list of checks (defined by DYLEASE_PLUGIN, hidden from other modules). */
extern DYLEASE_HIDDEN dylease_check_node *dylease_check_list_head;
extern DYLEASE_HIDDEN dylease_check_node **dylease_check_list_tail;

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

/* ---- The manifest notes (format version 1) ---- */
/* The bytes a string literal `s` takes in a note: sizeof(s) (with its NUL), padded to 4. */
#define DYLEASE_NOTE_PAD_(s) ((sizeof(s) + 3u) / 4u * 4u)
/* The attributes of every manifest note: kept, in the note section, 4-aligned. */
#define DYLEASE_NOTE_ATTRS_ __attribute__((used, section(".note.dylease"), aligned(4)))
/* The note header (n_namesz, n_descsz, n_type) and the owner "dylease" of a note. */
#define DYLEASE_NOTE_HEADER_ uint32_t namesz, descsz, type; char owner[8];
/* A length-prefixed string field named `field`, sized for the literal `s`. */
#define DYLEASE_NOTE_STRING_(field, s) uint32_t field##_len; char field[DYLEASE_NOTE_PAD_(s)];

/* The plugin record (n_type 1): format 1, the ABI version, flags, name, version. */
#define DYLEASE_PLUGIN_NOTE_(plugin_name, plugin_version, flags)                            \
    static const struct {                                                                     \
        DYLEASE_NOTE_HEADER_                                                                  \
        uint32_t format, abi_version, flag_bits;                                              \
        DYLEASE_NOTE_STRING_(name, plugin_name)                                               \
        DYLEASE_NOTE_STRING_(version, plugin_version)                                         \
    } dylease_manifest_plugin_ DYLEASE_NOTE_ATTRS_ = {                                        \
        8u, 12u + 4u + DYLEASE_NOTE_PAD_(plugin_name) + 4u + DYLEASE_NOTE_PAD_(plugin_version), \
        1u, "dylease", 1u, DYLEASE_ABI_VERSION, flags,                                        \
        sizeof(plugin_name), plugin_name, sizeof(plugin_version), plugin_version};

/* A pass record (n_type 2): flags (0), name, interface ("" when untyped). */
#define DYLEASE_PASS_NOTE_(pass_name, pass_interface, id)                                     \
    static const struct {                                                                     \
        DYLEASE_NOTE_HEADER_                                                                  \
        uint32_t flag_bits;                                                                   \
        DYLEASE_NOTE_STRING_(name, pass_name)                                                 \
        DYLEASE_NOTE_STRING_(interface, pass_interface)                                       \
    } DYLEASE_CAT(dylease_manifest_pass_, id) DYLEASE_NOTE_ATTRS_ = {                         \
        8u, 4u + 4u + DYLEASE_NOTE_PAD_(pass_name) + 4u + DYLEASE_NOTE_PAD_(pass_interface),   \
        2u, "dylease", 0u,                                                                    \
        sizeof(pass_name), pass_name, sizeof(pass_interface), pass_interface};
#define DYLEASE_PASS_NOTE(pass_name, pass_interface, id) DYLEASE_PASS_NOTE_(pass_name, pass_interface, id)

/* `id` is a number from __COUNTER__, unique in the translation unit. DYLEASE_PASS_AT writes no
 * pass record: the pass macros below add it, so that the manifest lists every pass. */
#define DYLEASE_PASS_AT_(pass_name, pass_interface, pass_fn, pass_data, id)                   \
    static dylease_pass_node DYLEASE_CAT(dylease_pass_node_, id) = {                          \
        pass_name, pass_interface, DYLEASE_FN_CAST_(pass_fn), DYLEASE_DATA_CAST_(pass_data),  \
        DYLEASE_NULL_};                                                                       \
    __attribute__((constructor)) static void DYLEASE_CAT(dylease_pass_link_, id)(void) {      \
        *dylease_pass_list_tail = &DYLEASE_CAT(dylease_pass_node_, id);                       \
        dylease_pass_list_tail = &DYLEASE_CAT(dylease_pass_node_, id).next;                   \
    }
#define DYLEASE_PASS_AT(pass_name, pass_interface, pass_fn, pass_data, id) \
    DYLEASE_PASS_AT_(pass_name, pass_interface, pass_fn, pass_data, id)

/* Registers `pass_fn` (any function) under `pass_name` (a string literal) with `pass_data`,
 * and writes its pass record (untyped) into the manifest. */
#define DYLEASE_PASS_WITH_DATA(pass_name, pass_fn, pass_data)                     \
    DYLEASE_PASS_AT(pass_name, DYLEASE_NULL_, pass_fn, pass_data, __COUNTER__)    \
    DYLEASE_PASS_NOTE(pass_name, "", __COUNTER__)

/* Registers `pass_fn` under `pass_name` as an implementation of `pass_interface` (a string
 * literal such as "ge.fusion_pass/1"), with `pass_data`, and writes its pass record into the
 * manifest. */
#define DYLEASE_TYPED_PASS_WITH_DATA(pass_name, pass_interface, pass_fn, pass_data) \
    DYLEASE_PASS_AT(pass_name, pass_interface, pass_fn, pass_data, __COUNTER__)     \
    DYLEASE_PASS_NOTE(pass_name, pass_interface, __COUNTER__)

/* Registers `pass_fn` under `pass_name` as an implementation of `pass_interface`. */
#define DYLEASE_TYPED_PASS(pass_name, pass_interface, pass_fn) \
    DYLEASE_TYPED_PASS_WITH_DATA(pass_name, pass_interface, pass_fn, DYLEASE_NULL_)

/* Registers `pass_fn` (any function) under `pass_name` (a string literal). */
#define DYLEASE_PASS(pass_name, pass_fn) DYLEASE_PASS_WITH_DATA(pass_name, pass_fn, DYLEASE_NULL_)

/* Registers the message pass `pass_fn` (a dylease_message_fn: the compiler checks it) under
 * `pass_name` (a string literal), as a typed pass of DYLEASE_MESSAGE_INTERFACE: callable in
 * an ordinary set and in an isolated one (the host's Lease::call). */
#define DYLEASE_MESSAGE_PASS_AT_(pass_name, pass_fn, id)                                      \
    __attribute__((unused)) static const dylease_message_fn DYLEASE_CAT(dylease_message_check_, id) = \
        pass_fn;                                                                              \
    DYLEASE_TYPED_PASS(pass_name, DYLEASE_MESSAGE_INTERFACE, pass_fn)
#define DYLEASE_MESSAGE_PASS_AT(pass_name, pass_fn, id) DYLEASE_MESSAGE_PASS_AT_(pass_name, pass_fn, id)
#define DYLEASE_MESSAGE_PASS(pass_name, pass_fn) DYLEASE_MESSAGE_PASS_AT(pass_name, pass_fn, __COUNTER__)

#define DYLEASE_CHECK_AT_(check_fn, id)                                                       \
    static dylease_check_node DYLEASE_CAT(dylease_check_node_, id) = {check_fn, DYLEASE_NULL_}; \
    __attribute__((constructor)) static void DYLEASE_CAT(dylease_check_link_, id)(void) {     \
        *dylease_check_list_tail = &DYLEASE_CAT(dylease_check_node_, id);                     \
        dylease_check_list_tail = &DYLEASE_CAT(dylease_check_node_, id).next;                 \
    }
#define DYLEASE_CHECK_AT(check_fn, id) DYLEASE_CHECK_AT_(check_fn, id)

/* Makes the plugin's registration fail with its own message: register_passes calls
 * `check_fn` (a `const char *(*)(void)`) at each registration, before any pass; a non-NULL
 * result is the reason, handed to the host's report() and returned as a failure, so the
 * host's error reads "... failed to register its passes: no NPU device found". Checks run in
 * the order their constructors linked them (within a translation unit, source order). */
#define DYLEASE_REGISTER_CHECK(check_fn) DYLEASE_CHECK_AT(check_fn, __COUNTER__)

/* Defines the plugin: its descriptor (ABI version 2), entry point and register_passes, and
 * its manifest's plugin record, which says the pass list is complete. Once per plugin, at
 * global scope. `load_fn` is an `int32_t (*)(void)` and `unload_fn` a
 * `void (*)(void)`; either may be NULL (nullptr in C++). register_passes registers every
 * pass of the list; on a host table of version 1 (another host than dylease's) a typed pass is
 * registered without its interface, which such a host has no notion of. */
#define DYLEASE_PLUGIN_WITH_HOOKS(plugin_name, plugin_version, load_fn, unload_fn)             \
    DYLEASE_AT_GLOBAL_SCOPE_                                                                  \
    DYLEASE_PLUGIN_NOTE_(plugin_name, plugin_version, 1u)                                     \
    DYLEASE_HIDDEN dylease_pass_node *dylease_pass_list_head = DYLEASE_NULL_;                 \
    DYLEASE_HIDDEN dylease_pass_node **dylease_pass_list_tail = &dylease_pass_list_head;      \
    DYLEASE_HIDDEN dylease_check_node *dylease_check_list_head = DYLEASE_NULL_;               \
    DYLEASE_HIDDEN dylease_check_node **dylease_check_list_tail = &dylease_check_list_head;   \
    static int32_t dylease_register_passes(const dylease_host_api *api, dylease_registrar *reg) { \
        const dylease_pass_node *node;                                                        \
        const dylease_check_node *check;                                                      \
        if (api == DYLEASE_NULL_ || api->abi_version < 1u) return -1;                         \
        for (check = dylease_check_list_head; check != DYLEASE_NULL_; check = check->next) {  \
            const char *why = check->check();                                                 \
            if (why != DYLEASE_NULL_) {                                                       \
                if (api->abi_version >= 2u) api->report(reg, why);                            \
                return -1;                                                                    \
            }                                                                                 \
        }                                                                                     \
        for (node = dylease_pass_list_head; node != DYLEASE_NULL_; node = node->next) {       \
            int32_t added;                                                                    \
            if (node->interface != DYLEASE_NULL_ && api->abi_version >= 2u) {                 \
                added = api->add_typed_pass(reg, node->name, node->interface, node->func,     \
                                            node->user_data);                                 \
            } else {                                                                          \
                added = api->add_pass(reg, node->name, node->func, node->user_data);          \
            }                                                                                 \
            if (added != 0) return -1;                                                        \
        }                                                                                     \
        return 0;                                                                             \
    }                                                                                         \
    static const dylease_plugin dylease_descriptor = {                                        \
        DYLEASE_ABI_VERSION, plugin_name, plugin_version, dylease_register_passes, unload_fn,  \
        load_fn};                                                                             \
    DYLEASE_EXPORT const dylease_plugin *dylease_plugin_v1(void) { return &dylease_descriptor; }

/* DYLEASE_PLUGIN_WITH_HOOKS without on_load. */
#define DYLEASE_PLUGIN_WITH_UNLOAD(plugin_name, plugin_version, unload_fn) \
    DYLEASE_PLUGIN_WITH_HOOKS(plugin_name, plugin_version, DYLEASE_NULL_, unload_fn)

/* DYLEASE_PLUGIN_WITH_HOOKS without on_load or on_unload. */
#define DYLEASE_PLUGIN(plugin_name, plugin_version) \
    DYLEASE_PLUGIN_WITH_HOOKS(plugin_name, plugin_version, DYLEASE_NULL_, DYLEASE_NULL_)

/* The manifest's plugin record alone, for a plugin that defines dylease_plugin_v1 by hand:
 * `plugin_name` and `plugin_version` are the string literals of its descriptor. Its pass list
 * is not complete: the passes such a plugin registers are its own business. Once per plugin,
 * at file scope, and not together with DYLEASE_PLUGIN*. */
#define DYLEASE_MANIFEST(plugin_name, plugin_version) \
    DYLEASE_PLUGIN_NOTE_(plugin_name, plugin_version, 0u)

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* DYLEASE_H */
