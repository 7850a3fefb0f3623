# The host side of dylease's Python plugins, compiled once per process from the Rust crate
# (src/python/interpreter.rs). Rust calls the functions below with the GIL held; see the module
# documentation of `dylease::python` (src/python/mod.rs) for the design.
import ast
import builtins
import gc
import sys
import traceback
import types
import weakref
import importlib.util
import re

_real_import = builtins.__import__

# The manifest reader's own references, taken before any plugin runs: a plugin may patch the
# shared `ast` module, and its patch must not run while another plugin's manifest is read.
_parse = ast.parse
_walk = ast.walk
_AST_BOUND = 2000  # the recursion limit while a manifest is read (see `manifest`)
_SOURCE_BOUND = 8 << 20  # bytes of source a manifest is read from, at most


class Refused(Exception):
    """A plugin's `register_passes` returned False: the message is what it reported."""


class _Described(Exception):
    """An instance's execution failed: the message is the failure described (`describe`) while
    its private names could still be told by their public ones."""


# private module name of a live instance -> its public name (the file's stem, the package's
# directory name), for the messages that name a module.
_PUBLIC = {}

# The file name of this module's code, whose frames a traceback's location skips.
_HOST_FILE = (lambda: None).__code__.co_filename


class _Sources:
    """Serves the submodules of the packages that instances execute, from the sources the
    host read from the checked files (never from the file system, never from a cache)."""

    def __init__(self):
        # private module name -> (path, source, is_package, builtins of its instance)
        self.modules = {}

    def find_spec(self, fullname, path=None, target=None):
        entry = self.modules.get(fullname)
        if entry is None:
            return None
        return importlib.util.spec_from_loader(fullname, self, origin=entry[0], is_package=entry[2])

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        path, source, _, instance_builtins = self.modules[module.__name__]
        module.__file__ = path
        module.__builtins__ = instance_builtins
        exec(compile(source, path, "exec", dont_inherit=True), module.__dict__)


_SOURCES = _Sources()
sys.meta_path.insert(0, _SOURCES)

# The parent of every instance's private name: `import _dylease.3.helper` (what a relative
# import in a package does) looks the top-level name up too. It holds nothing.
_PARENT = types.ModuleType("_dylease", "The parent of dylease's private plugin module names.")
_PARENT.__path__ = []
sys.modules.setdefault("_dylease", _PARENT)


def _api(default_name):
    """The `dylease` module one instance sees: its own, with its own list of decorated passes."""
    api = types.ModuleType("dylease", "The host's API for this Python plugin.")
    state = {"name": default_name, "version": "", "passes": []}

    def plugin(name, version=""):
        """Names this plugin and its version (default: the file's stem, no version)."""
        state["name"] = str(name)
        state["version"] = str(version)

    def typed_pass(name, interface):
        """Registers the decorated callable as pass `name` implementing `interface`."""

        def record(func):
            state["passes"].append((str(name), str(interface), func))
            return func

        return record

    api.plugin = plugin
    api.typed_pass = typed_pass
    # The reader of manifests treats any mention of this name as a pass it cannot see.
    api._dylease_state = state
    return api


def _builtins_for(api):
    """Builtins whose `import dylease` gives this instance's own API module."""
    own = dict(builtins.__dict__)

    def __import__(name, globals=None, locals=None, fromlist=(), level=0):
        if level == 0 and name == "dylease":
            return api
        return _real_import(name, globals, locals, fromlist, level)

    own["__import__"] = __import__
    return own


def _private_names(private):
    return [name for name in list(sys.modules) if name == private or name.startswith(private + ".")]


def _forget(private):
    """Removes an instance's modules from sys.modules and from the source table."""
    for name in list(_SOURCES.modules):
        if name == private or name.startswith(private + "."):
            del _SOURCES.modules[name]
    for name in _private_names(private):
        sys.modules.pop(name, None)
    _PUBLIC.pop(private, None)
    parent = sys.modules.get("_dylease")
    child = private.rpartition(".")[2]
    if parent is not None and child in vars(parent):
        delattr(parent, child)


def execute(private, default_name, files, is_package):
    """Executes one instance under the private module name `private`. `files` lists
    (module name suffix, path, source): "" is the plugin file itself (a package's
    `__init__.py`). Returns (module, api). On an exception nothing of it stays, and what is
    raised is `_Described`, its message the failure as `describe` tells it."""
    _PUBLIC[private] = default_name
    api = _api(default_name)
    own = _builtins_for(api)
    for suffix, path, source in files:
        if suffix:
            _SOURCES.modules[private + "." + suffix] = (path, source, suffix in _package_suffixes(files), own)
    main_path, main_source = next((path, source) for suffix, path, source in files if suffix == "")
    try:
        spec = importlib.util.spec_from_loader(private, None, origin=main_path, is_package=is_package)
        module = importlib.util.module_from_spec(spec)
        module.__file__ = main_path
        module.__builtins__ = own
        sys.modules[private] = module
        exec(compile(main_source, main_path, "exec", dont_inherit=True), module.__dict__)
    except BaseException as error:
        text = describe(error)
        _forget(private)
        raise _Described(text) from None
    return module, api


def _package_suffixes(files):
    """The suffixes that are packages: a directory with an `__init__.py`."""
    return {suffix for suffix, path, _ in files if suffix and path.endswith("__init__.py")}


def identity(module, api):
    """The plugin's (name, version)."""
    return api._dylease_state["name"], api._dylease_state["version"]


def hook(module, name):
    """The module's `on_load` / `on_unload`, or None."""
    return getattr(module, name, None)


class Registration:
    """What `register_passes(reg)` gets."""

    def __init__(self):
        self.passes = []
        self.reports = []

    def add_typed_pass(self, name, interface, func):
        """Registers `func` as pass `name` implementing `interface`."""
        if not callable(func):
            raise TypeError(f"pass {name!r}: {func!r} is not callable")
        self.passes.append((str(name), str(interface), func))

    def report(self, message):
        """Says why the registration fails (then return False, or raise)."""
        self.reports.append(str(message))


def register(module, api):
    """The passes of one set: `register_passes(reg)` if the module defines it, otherwise the
    decorated list."""
    register_passes = getattr(module, "register_passes", None)
    if register_passes is None:
        return list(api._dylease_state["passes"])
    reg = Registration()
    if register_passes(reg) is False:
        raise Refused("; ".join(reg.reports) or "register_passes returned False")
    return reg.passes


def unload(private, module, api):
    """Removes the instance's modules; returns weak references to every module object, for
    `settle`."""
    refs = []
    for obj in [module] + [sys.modules[name] for name in _private_names(private)]:
        if isinstance(obj, types.ModuleType) and not any(ref() is obj for ref in refs):
            refs.append(weakref.ref(obj))
    api._dylease_state["passes"].clear()
    _forget(private)
    return refs


def settle(refs):
    """Collects garbage; returns the names of the module objects that survived."""
    gc.collect()
    return [ref().__name__ for ref in refs if ref() is not None]


def describe(exc, tb=None):
    """`Type: message (raised at FILE, line N)`, from the exception and its traceback: the
    line is the plugin's own (the innermost frame that is not this module's, such as its
    import shim), and a module is named by its public name, not its private one."""
    if isinstance(exc, (Refused, _Described)):
        return str(exc)
    if isinstance(exc, SyntaxError) and exc.filename:
        return _public(f"{type(exc).__name__}: {exc.msg} (at {exc.filename}, line {exc.lineno})")
    text = "".join(traceback.format_exception_only(type(exc), exc)).strip().splitlines()[-1]
    text += _missing_name(exc)
    frames = [
        frame
        for frame in traceback.extract_tb(tb or exc.__traceback__)
        if frame.filename != _HOST_FILE and not frame.filename.startswith("<frozen importlib")
    ]
    if frames:
        last = frames[-1]
        text = f"{text} (raised at {last.filename}, line {last.lineno})"
    return _public(text)


def _public(text):
    """`text` with each live instance's private module name replaced by its public name."""

    def public(match):
        return _PUBLIC.get(match.group(1), match.group(0))

    return re.sub(r"\b(_dylease\.[0-9]+)(?![0-9])", public, text)


def _missing_name(exc):
    """For `from . import x` in a package that has neither a module nor a name `x`: which
    module of the package it looked for (Python's message names only the package)."""
    if not isinstance(exc, ImportError) or not isinstance(exc.name, str) or exc.name not in _modules():
        return ""
    found = re.match(r"cannot import name '([^']+)'", str(exc))
    if found is None or f"{exc.name}.{found.group(1)}" in _SOURCES.modules:
        return ""
    return f": the package has no module {exc.name}.{found.group(1)}"


def _modules():
    """The private names of every live instance and of its submodules."""
    return set(_PUBLIC) | set(_SOURCES.modules)


# The manifest: what a plugin declares, read from its syntax tree without running any of it.

# Names whose use means code the reader cannot read: it could do anything, name the plugin too.
_DYNAMIC = {"exec", "eval", "compile", "__builtins__"}
# Names (of functions, attributes, imports) whose use reaches what the reader cannot follow:
# a namespace or an object found at run time, an attribute or a module looked up by a computed
# name, the host's own record of the plugin's passes. Through them a plugin can register a pass
# (`sys._getframe(0).f_globals[...]`, `getattr(module, "typed" + "_pass")`) or define a
# `register_passes` the reader does not see: the pass list is incomplete, and the load
# compares the name and the declared passes with what the plugin registered.
_UNFOLLOWED = {
    **dict.fromkeys(
        [
            "globals",
            "locals",
            "vars",
            "_getframe",
            "currentframe",
            "f_globals",
            "f_locals",
            "f_builtins",
            "f_back",
            "tb_frame",
            "gi_frame",
            "cr_frame",
            "ag_frame",
            "__globals__",
            "__dict__",
            "__closure__",
            "cell_contents",
            "get_objects",
            "get_referrers",
            "get_referents",
        ],
        "reaches a namespace or an object that the reader cannot follow",
    ),
    **dict.fromkeys(
        ["getattr", "setattr", "delattr", "attrgetter", "methodcaller"],
        "looks an attribute up by a name that is not a string literal",
    ),
    **dict.fromkeys(
        ["__getattribute__", "__setattr__", "__delattr__"],
        "looks an attribute up by a name the reader does not follow",
    ),
    "__import__": "imports a module by a name the reader does not follow",
    "importlib": "imports modules by names the reader does not follow",
    "import_module": "imports a module by a name the reader does not follow",
    "_dylease_state": "touches the host's own record of the plugin's passes",
}
# Those of them that a string constant may name too (`getattr(sys, "_getframe")`): not the
# plain words, which strings of honest code hold.
_UNFOLLOWED_STRINGS = set(_UNFOLLOWED) - {
    "globals",
    "locals",
    "vars",
    "getattr",
    "setattr",
    "delattr",
}
# The lookups by name whose name argument, a string literal, the reader reads (a positional
# index, or None for every positional argument): `getattr(module, "x")` is followed.
_LOOKUPS = {"getattr": 1, "setattr": 1, "delattr": 1, "attrgetter": None, "methodcaller": 0}
# String constants that name what could register a pass the reader cannot see.
_HIDDEN_STRINGS = {"typed_pass", "register_passes"}
# Names whose binding in the plugin file could give it a `register_passes` (a module's
# `__getattr__` answers `getattr(module, "register_passes")` too).
_REGISTERING = {"register_passes", "__getattr__"}


class _Unnamed(Exception):
    """The plugin's name or version cannot be read statically: it has no manifest."""


def manifest(default_name, files, is_package):
    """The manifest of a plugin whose sources are `files` (as for `execute`), read with `ast`
    alone, never executing any of it: None if its name or version cannot be read, otherwise
    (name, version, why incomplete, [(pass, interface)]), where "why incomplete" lists what
    could register a pass the reader cannot see, each with its file and line (empty: the pass
    list is complete). A file that does not parse raises its SyntaxError (naming the file and
    line)."""
    # A source larger than any plugin's has no manifest (it loads as a plugin without one).
    if sum(len(source) for _, _, source in files) > _SOURCE_BOUND:
        return None
    # Deeply nested source makes the parser recurse: with a recursion limit an application or
    # a plugin raised, that could overflow the C stack; under a bound it raises instead.
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(min(limit, _AST_BOUND))
    try:
        return _manifest(default_name, files, is_package)
    finally:
        sys.setrecursionlimit(limit)


def _manifest(default_name, files, is_package):
    trees = []
    for suffix, path, source in files:
        trees.append((suffix, _parse(source, filename=path)))
    packages = _package_suffixes(files) | ({""} if is_package else set())
    known = {suffix for suffix, _ in trees}
    try:
        aliases = _all_aliases(trees, packages, known)
        paths = {suffix: path for suffix, path, _ in files}
        readers = [
            _FileReader(suffix, paths[suffix], tree, suffix in packages, known, aliases)
            for suffix, tree in trees
        ]
    except _Unnamed:
        return None
    main = next(reader for reader in readers if reader.suffix == "")
    name = default_name if main.name is None else main.name
    version = "" if main.version is None else main.version
    reasons = [reason for reader in readers for reason in reader.reasons]
    if main.register_passes:
        reasons.append(f"the plugin file defines, assigns or imports {main.register_passes}")
    # A submodule's decorators run when it is imported: surely if a chain of plain module-level
    # imports leads to it from the plugin file, perhaps if any other import names it (then
    # the manifest is incomplete). The passes of a file that no file imports stay declared:
    # the load then fails on them (`Manifest::compare`), naming a file that is dead code.
    sure = {""}
    grew = True
    while grew:
        grew = False
        for reader in readers:
            if reader.suffix in sure:
                for target in reader.sure_imports:
                    if target not in sure:
                        sure.add(target)
                        grew = True
    mentioned = set()
    for reader in readers:
        mentioned |= reader.sure_imports | reader.other_imports
    passes = []
    for reader in readers:
        if reader.passes and reader.suffix not in sure and reader.suffix in mentioned:
            reasons.append(
                f"the passes of {reader.path} are registered only if an import of it that is not a "
                "plain module-level one from the plugin file runs"
            )
        passes.extend(reader.passes)
    return name, version, list(dict.fromkeys(reasons)), passes


def _literal(node):
    """The string a node is, if it is a string literal; otherwise None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def _arguments(call, names):
    """The string literals of `call`'s arguments by parameter name (`names` in order), or None
    if any argument is not one or not a parameter of that name."""
    values = {}
    if len(call.args) > len(names):
        return None
    for name, arg in zip(names, call.args):
        values[name] = _literal(arg)
    for keyword in call.keywords:
        if keyword.arg is None or keyword.arg not in names or keyword.arg in values:
            return None
        values[keyword.arg] = _literal(keyword.value)
    if any(value is None for value in values.values()):
        return None
    return values


def _base(suffix, is_package):
    """The package a module's relative imports start from."""
    return suffix if is_package else suffix.rpartition(".")[0]


def _relative(base, node):
    """The package module `from ... import` names (its suffix, as a list of names), or None
    for an absolute import or one that leaves the package."""
    if node.level == 0:
        return None
    parts = base.split(".") if base else []
    if node.level - 1 > len(parts):
        return None
    parts = parts[: len(parts) - (node.level - 1)]
    return parts, parts + (node.module.split(".") if node.module else [])


def _own_aliases(tree):
    """alias -> "module" | "plugin" | "typed_pass": each name the file imports the API
    under, wherever in the file it does."""
    aliases = {}
    for node in _walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "dylease" or alias.name.startswith("dylease."):
                    _bind(aliases, alias.asname or "dylease", "module")
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module == "dylease":
            for alias in node.names:
                if alias.name == "*":
                    _bind(aliases, "plugin", "plugin")
                    _bind(aliases, "typed_pass", "typed_pass")
                elif alias.name in ("plugin", "typed_pass"):
                    _bind(aliases, alias.asname or alias.name, alias.name)
                else:
                    raise _Unnamed()
    return aliases


def _bind(aliases, name, kind):
    """Records `name` as the API object `kind`; a name bound to two of them is ambiguous."""
    if aliases.setdefault(name, kind) != kind:
        raise _Unnamed()


def _all_aliases(trees, packages, known):
    """Every file's aliases, with those it imports from the package's modules: the API names
    another module holds (`from .api import tp`, `from . import dylease`), a star import's
    public ones (`from .passes import *`)."""
    aliases = {suffix: _own_aliases(tree) for suffix, tree in trees}
    # (importer, module imported from, name there or "*", name bound)
    links = []
    for suffix, tree in trees:
        base = _base(suffix, suffix in packages)
        for node in _walk(tree):
            if not isinstance(node, ast.ImportFrom):
                continue
            resolved = _relative(base, node)
            if resolved is None:
                continue
            source = ".".join(resolved[1])
            if source not in known:
                continue
            for alias in node.names:
                links.append((suffix, source, alias.name, alias.asname or alias.name))
    grew = True
    while grew:
        grew = False
        for importer, source, name, bound in links:
            if name == "*":
                found = [(n, kind) for n, kind in aliases[source].items() if not n.startswith("_")]
            else:
                found = [(bound, aliases[source][name])] if name in aliases[source] else []
            for n, kind in found:
                if n not in aliases[importer]:
                    grew = True
                _bind(aliases[importer], n, kind)
    return aliases


class _FileReader:
    """One file's declarations: its `dylease.plugin(...)` call (the plugin file's), its
    decorated passes, its imports of the package's modules, and what it saw that could register
    a pass it cannot see (`reasons`, each with the line; none: it saw all). Raises `_Unnamed`
    if what it sees could name the plugin in a way it cannot read."""

    def __init__(self, suffix, path, tree, is_package, known, aliases):
        self.suffix = suffix
        self.path = path
        self.name = None
        self.version = None
        self.passes = []
        self.reasons = []
        # What in the plugin file could give it a `register_passes` (a phrase), or False.
        self.register_passes = False
        self.sure_imports = set()
        self.other_imports = set()
        self.aliases = aliases[suffix]
        self.recognised = set()
        for statement in tree.body:
            self._top_level(statement)
        base = _base(suffix, is_package)
        for node in _walk(tree):
            self._check(node, tree, base, known)

    def _incomplete(self, node, what):
        """Records that `node` could register a pass the reader cannot see: `what` it does."""
        line = getattr(node, "lineno", None)
        where = f"{self.path}, line {line}" if line is not None else self.path
        self.reasons.append(f"{what} ({where})")

    def _registering(self, name):
        """Records the plugin file's binding of `name`, which could be a `register_passes`."""
        if name == "register_passes":
            self.register_passes = "`register_passes`"
        elif not self.register_passes:
            self.register_passes = f"`{name}` (a module's `{name}` answers for a `register_passes`)"

    def _kind(self, node):
        """What API object `node` refers to, or None."""
        if isinstance(node, ast.Name):
            return self.aliases.get(node.id)
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and self.aliases.get(node.value.id) == "module"
            and node.attr in ("plugin", "typed_pass")
        ):
            return node.attr
        return None

    def _recognise(self, call):
        self.recognised.add(id(call.func))
        if isinstance(call.func, ast.Attribute):
            self.recognised.add(id(call.func.value))
        for arg in call.args + [keyword.value for keyword in call.keywords]:
            self.recognised.add(id(arg))

    def _top_level(self, statement):
        if (
            self.suffix == ""
            and isinstance(statement, ast.Expr)
            and isinstance(statement.value, ast.Call)
            and self._kind(statement.value.func) == "plugin"
        ):
            values = _arguments(statement.value, ["name", "version"])
            if values is None or "name" not in values:
                raise _Unnamed()
            self.name, self.version = values["name"], values.get("version", "")
            self._recognise(statement.value)
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for decorator in statement.decorator_list:
                if isinstance(decorator, ast.Call) and self._kind(decorator.func) == "typed_pass":
                    values = _arguments(decorator, ["name", "interface"])
                    if values is None or len(values) != 2:
                        # Computed: a pass the reader cannot name.
                        self._incomplete(
                            decorator, "a `typed_pass` decorator has an argument that is not a string literal"
                        )
                    else:
                        self.passes.append((values["name"], values["interface"]))
                    self._recognise(decorator)

    def _check(self, node, tree, base, known):
        """What the node means for the manifest, unless it is one the reader recognised."""
        if id(node) in self.recognised:
            return
        if isinstance(node, ast.Name):
            if node.id in self.aliases:
                self._escaped(self.aliases[node.id], node)
            elif node.id in _DYNAMIC:
                raise _Unnamed()
            elif node.id in _UNFOLLOWED:
                self._unfollowed(node, node.id)
            elif node.id in _REGISTERING and self.suffix == "" and not isinstance(node.ctx, ast.Load):
                self._registering(node.id)
        elif isinstance(node, ast.Attribute):
            kind = self._kind(node)
            if kind is not None:
                self._escaped(kind, node)
                self.recognised.add(id(node.value))
            elif node.attr == "dylease":
                raise _Unnamed()
            elif node.attr in _HIDDEN_STRINGS:
                self._incomplete(node, f"`{node.attr}` is named where the reader does not follow it")
            elif node.attr in _UNFOLLOWED:
                self._unfollowed(node, node.attr)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if node.value == "dylease":
                raise _Unnamed()
            if node.value in _HIDDEN_STRINGS:
                self._incomplete(node, f"`{node.value}` is named where the reader does not follow it")
            elif node.value in _UNFOLLOWED_STRINGS:
                self._incomplete(node, f"the string `{node.value}` {_UNFOLLOWED[node.value]}")
        elif isinstance(node, ast.Call):
            self._lookup(node)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if node.name in _REGISTERING and self.suffix == "":
                self._registering(node.name)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            for name in node.names:
                if name in _REGISTERING and self.suffix == "":
                    self._registering(name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                bound = alias.asname or alias.name.partition(".")[0]
                if self.suffix == "" and bound in _REGISTERING:
                    self._registering(bound)
                if alias.name.partition(".")[0] == "importlib":
                    self._unfollowed(node, "importlib")
        elif isinstance(node, ast.ImportFrom):
            self._import_from(node, tree, base, known)

    def _unfollowed(self, node, name):
        """`name` (a name, an attribute) reaches what the reader cannot follow."""
        self._incomplete(node, f"`{name}` {_UNFOLLOWED[name]}")

    def _lookup(self, call):
        """A call of a lookup by name (`getattr(module, "x")`, `operator.attrgetter("x")`)
        whose name is a string literal is followed: the function's name is not then counted
        (the string is read as any string is)."""
        func = call.func
        name = getattr(func, "id", None) or getattr(func, "attr", None)
        if name not in _LOOKUPS or call.keywords:
            return
        index = _LOOKUPS[name]
        named = call.args if index is None else call.args[index : index + 1]
        if named and all(_literal(arg) is not None for arg in named):
            self.recognised.add(id(func))

    def _escaped(self, kind, node):
        """An API object used other than as the reader reads it: passed on, renamed, called
        not at module level or not as a decorator."""
        if kind == "typed_pass":
            self._incomplete(
                node,
                "`typed_pass` is used other than as a decorator of a module-level function or class",
            )
        else:
            raise _Unnamed()

    def _import_from(self, node, tree, base, known):
        if node.level == 0 and node.module == "dylease":
            return
        if node.module is not None and node.module.partition(".")[0] == "importlib":
            self._unfollowed(node, "importlib")
        for alias in node.names:
            bound = alias.asname or alias.name
            if alias.name == "*" and self.suffix == "":
                self._incomplete(node, "a `*` import in the plugin file could bring a `register_passes`")
            elif self.suffix == "" and bound in _REGISTERING:
                self._registering(bound)
            # `from sys import _getframe as frame`: its uses go by another name.
            if alias.name in _UNFOLLOWED and bound != alias.name:
                self._unfollowed(node, alias.name)
        resolved = _relative(base, node)
        if resolved is None:
            return
        # The package's modules it imports: the one named and every one above it, and each
        # imported name that is a module.
        parts, target = resolved
        imported = {".".join(target[:n]) for n in range(len(parts) + 1, len(target) + 1)}
        for alias in node.names:
            below = ".".join(target + [alias.name])
            if below in known:
                imported.add(below)
        imported &= known
        if node in tree.body:
            self.sure_imports |= imported
        else:
            self.other_imports |= imported
