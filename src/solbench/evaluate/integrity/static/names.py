"""Name resolution for the Python scan: what a name, attribute chain or call really refers to.

Names resolve to their real dotted form through ``import x as y``, ``from x import y as z``, simple assignments
(``F = torch.nn.functional``, ``e = exec``), ``getattr(m, "const")``, ``operator.attrgetter("const")(m)``,
``importlib.import_module("const")``, and lookups in module namespaces: ``sys.modules``, ``vars(m)``,
``m.__dict__``, ``__builtins__``, ``globals()``, by subscript, ``.get``/``__getitem__``, and through copies
(``dict(sys.modules)``, ``sys.modules.copy()``). ``f.__builtins__`` is the builtins namespace and
``print.__self__`` the builtins module. Strings built from constants (``"thr" + "eading"``, ``"".join([...])``,
``chr(...)``, ``s[::-1]``, f-strings) are folded (``folding``), so a rule still sees the real name.
"""

from __future__ import annotations

import ast
import builtins as _builtins_module

from .folding import Folding
from .tree import index

BUILTIN_NAMES = frozenset(dir(_builtins_module)) | {"__builtins__"}
#: roots whose attributes must not be replaced; an assignment from one of them is followed as an alias
PROTECTED_ROOTS = frozenset({"torch", "time", "triton", "builtins", "sys", "gc", "os", "solbench", "numpy",
                             "statistics", "timeit", "math", "random", "importlib", "threading", "signal",
                             "inspect", "functools", "ctypes"})
_CTYPES_ROOTS = ("ctypes", "cffi", "_ctypes")
#: what ``globals()`` (and ``vars()`` without an argument) resolves to: this file's own namespace
MODULE_NS = "<module>"
#: what a relative import above the solution's files resolves to (it fails when it runs)
RELATIVE = "<relative>"
#: calls that return a copy or view of the mapping they are given
_MAPPING_COPIES = frozenset({"dict", "types.MappingProxyType", "collections.ChainMap", "collections.OrderedDict",
                             "copy.copy"})
_LOOKUP_METHODS = frozenset({"get", "__getitem__"})
_NAMESPACE_METHODS = _LOOKUP_METHODS | {"copy"}


def is_namespace(name: str | None) -> bool:
    """Whether a resolved name is a mapping of a module's names (``sys.modules`` maps names to modules)."""
    return bool(name) and (name == "sys.modules" or name == "builtins" or name == MODULE_NS
                           or name.endswith(".__dict__"))


class NameResolver(Folding):
    """Aliases and assignments of one Python file, and the resolution and folding (``Folding``) built on them."""

    def __init__(self, tree: ast.Module, module: str | None = None, is_package: bool = False):
        self.tree = tree
        #: the module this file is imported as (``pkg.helper``; ``pkg`` for ``pkg/__init__.py``), for its relative
        #: imports
        self.module = module
        self.is_package = is_package
        self.aliases: dict[str, str] = {}
        #: the dotted names this file imports as modules (``import a.b`` makes ``a`` and ``a.b`` modules)
        self.known: set[str] = set()
        self.shadowed: set[str] = set()
        self.global_names: set[str] = set()
        self.module_defs: dict[str, ast.AST] = {}
        #: (target, value) of every assignment, (target, annotation) of annotated ones, decorated functions
        self.assigns: list[tuple[ast.AST, ast.AST]] = []
        self.annotated: list[tuple[ast.AST, ast.AST]] = []
        self.decorated: list[ast.AST] = []
        self.uses_ctypes = False
        self.cur: ast.AST = tree
        self.order, self.members = index(tree)
        self._assign_maps: dict[int, dict[str, list[ast.AST]]] = {}

    # ---- pre-pass

    def prepass(self) -> None:
        assigns = self.assigns
        for node in self.tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.module_defs[node.name] = node
                if node.name in BUILTIN_NAMES:
                    self.shadowed.add(node.name)
        for node in self.order:
            t = type(node)
            if t is ast.FunctionDef or t is ast.AsyncFunctionDef:
                if node.decorator_list:
                    self.decorated.append(node)
            elif t is ast.Import:
                for a in node.names:
                    if a.asname:
                        self.aliases[a.asname] = a.name
                    else:
                        root = a.name.split(".")[0]
                        self.aliases[root] = root
                    self._know(a.name)
                    if a.name.split(".")[0] in _CTYPES_ROOTS:
                        self.uses_ctypes = True
            elif t is ast.ImportFrom:
                module = self.absolute(node)
                if not module:
                    continue
                self._know(module)
                if module.split(".")[0] in _CTYPES_ROOTS:
                    self.uses_ctypes = True
                for a in node.names:
                    if a.name != "*":
                        self.aliases[a.asname or a.name] = f"{module}.{a.name}"
            elif t is ast.Assign:
                for tgt in node.targets:
                    assigns.append((tgt, node.value))
            elif t is ast.AnnAssign and node.value is not None:
                assigns.append((node.target, node.value))
                self.annotated.append((node.target, node.annotation))
            elif t is ast.Global or t is ast.Nonlocal:
                self.global_names.update(node.names)
            elif t is ast.NamedExpr:
                assigns.append((node.target, node.value))
        # aliases by assignment (two rounds so chains resolve); a value resolves only where it names a module or
        # something reached from one (calls: getattr, import_module, namespace lookups and copies)
        for _ in range(2):
            for tgt, val in assigns:
                if isinstance(tgt, ast.Name) and isinstance(val, (ast.Name, ast.Attribute, ast.Call, ast.Subscript,
                                                                  ast.IfExp)):
                    if tgt.id not in self.aliases:
                        r = self.resolve(val)
                        if r:
                            self.aliases[tgt.id] = r

    def _know(self, module: str) -> None:
        parts = module.split(".")
        self.known.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))

    def absolute(self, node: ast.ImportFrom) -> str | None:
        """The module a ``from`` import names: a relative one resolved against this file's package (``<relative>``
        where it climbs above the solution, which fails when it runs)."""
        if not node.level:
            return node.module
        if self.module is None:
            return RELATIVE
        package = self.module.split(".")
        if not self.is_package:
            package = package[:-1]
        if node.level > len(package):
            return RELATIVE
        base = package[:len(package) - node.level + 1]
        return ".".join(base + ([node.module] if node.module else []))

    # ---- name resolution

    def resolve(self, node: ast.AST) -> str | None:
        t = type(node)
        if t is ast.Name:
            n = node.id
            if n in self.aliases:
                return norm(self.aliases[n])
            if n in BUILTIN_NAMES and n not in self.shadowed:
                return norm(n)
            return None
        if t is ast.Attribute:
            attr = node.attr
            if attr == "__builtins__":
                return "builtins"  # a function's or a module's builtins, whatever it belongs to
            base = self.resolve(node.value)
            if not base:
                return None
            if attr == "__self__":  # a builtin function's module: print.__self__ is builtins
                return base.rsplit(".", 1)[0] if "." in base else "builtins"
            return norm(f"{base}.{attr}")
        if t is ast.Call:
            return self._resolve_call(node)
        if t is ast.Subscript:
            base = self.resolve(node.value)
            return self.lookup(base, node.slice) if is_namespace(base) else None
        if t is ast.IfExp:  # ``b if isinstance(b, dict) else vars(b)``: both branches the same namespace
            a, b = self.resolve(node.body), self.resolve(node.orelse)
            if a and b and a.removesuffix(".__dict__") == b.removesuffix(".__dict__"):
                return a
        return None

    def _resolve_call(self, node: ast.Call) -> str | None:
        func, args = node.func, node.args
        if type(func) is ast.Attribute and func.attr in _NAMESPACE_METHODS:
            base = self.resolve(func.value)  # structurally: norm() drops "builtins." from the callee's name
            if is_namespace(base):
                if func.attr == "copy":
                    return None if args else base
                return self.lookup(base, args[0]) if args else None
        if type(func) is ast.Call and len(args) == 1 and len(func.args) == 1:
            g = self.resolve(func.func)
            if g == "operator.attrgetter":  # attrgetter("a.b")(m) is m.a.b
                base, name = self.resolve(args[0]), self.fold(func.args[0])
                return norm(f"{base}.{name}") if base and name else None
            if g == "operator.itemgetter":
                base = self.resolve(args[0])
                return self.lookup(base, func.args[0]) if is_namespace(base) else None
            return None
        f = self.resolve(func)
        if f is None:
            return None
        if f == "getattr" and len(args) >= 2:
            base = self.resolve(args[0])
            if not base:
                return None
            name = self.fold(args[1])
            if name is None:  # a name that loops over one constant: ``for n in ("__import__",)``
                consts = self.constants(args[1])
                name = next(iter(consts)) if consts and len(consts) == 1 else None
            return norm(f"{base}.{name}") if name else None
        if f == "functools.reduce" and len(args) == 3 and self.resolve(args[0]) == "getattr":
            base = self.resolve(args[2])  # reduce(getattr, ("a", "b"), m) is m.a.b
            names = [self.fold(e) for e in args[1].elts] if type(args[1]) in (ast.Tuple, ast.List) else [None]
            return norm(".".join([base] + names)) if base and None not in names else None
        if f in ("importlib.import_module", "__import__") and args:
            return self.fold(args[0])
        if f == "vars":
            if not args:
                return MODULE_NS
            base = self.resolve(args[0]) if len(args) == 1 else None
            return f"{base}.__dict__" if base else None
        if f == "globals" and not args:
            return MODULE_NS
        if f in _MAPPING_COPIES and len(args) == 1:
            base = self.resolve(args[0])
            return base if is_namespace(base) else None
        return None

    def lookup(self, base: str, key_node: ast.AST) -> str | None:
        """The name ``base[key]`` reaches, for a namespace ``base``."""
        key = self.fold(key_node)
        if not key:
            return None
        if base == "sys.modules":
            return key
        if base == MODULE_NS:
            return self.resolve(ast.Name(id=key))
        root = base.removesuffix(".__dict__")
        return norm(f"{root}.{key}")

    # ---- what a name is bound to in the current scope

    def _scope_map(self, scope: ast.AST) -> dict[str, list[ast.AST]]:
        key = id(scope)
        m = self._assign_maps.get(key)
        if m is not None:
            return m
        m = {}
        for n in self.members.get(key, ()):
            t = type(n)
            if t is ast.Assign:
                for tgt in n.targets:
                    bind(m, tgt, n.value)
            elif t in (ast.AnnAssign, ast.AugAssign, ast.NamedExpr):
                if n.value is not None:
                    bind(m, n.target, n.value)
            elif t in (ast.For, ast.AsyncFor, ast.comprehension):
                bind(m, n.target, n.iter)
            elif t is ast.withitem:
                if n.optional_vars is not None:
                    bind(m, n.optional_vars, n.context_expr)
        self._assign_maps[key] = m
        return m

    def assigned(self, name: str) -> list[ast.AST]:
        """The values ``name`` is bound to in the current scope (or at module level)."""
        scope = self.cur
        vals = self._scope_map(scope).get(name)
        if vals is None and scope is not self.tree:
            vals = self._scope_map(self.tree).get(name)
        return vals or []


# --------------------------------------------------------------------------------------------
# small helpers


def norm(name: str) -> str:
    if name in _BUILTINS_DICTS:
        return "builtins"  # the builtins namespace itself, which a lookup can still go through
    for p in ("builtins.", "__builtins__.", "__builtin__."):
        if name.startswith(p):
            return name[len(p):]
    if name in ("__builtins__", "__builtin__"):
        return "builtins"
    if name.startswith("np."):
        return "numpy." + name[3:]
    return name


_BUILTINS_DICTS = frozenset({"builtins.__dict__", "__builtins__.__dict__", "__builtin__.__dict__"})


def bind(m: dict[str, list[ast.AST]], tgt: ast.AST, value: ast.AST) -> None:
    if isinstance(tgt, ast.Name):
        m.setdefault(tgt.id, []).append(value)
    elif isinstance(tgt, (ast.Tuple, ast.List)):
        for e in tgt.elts:
            bind(m, e, value)
    elif isinstance(tgt, ast.Starred):
        bind(m, tgt.value, value)


def falsy(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and not node.value


def literal(node: ast.AST | None) -> bool:
    if node is None:
        return True
    try:
        ast.literal_eval(node)
        return True
    except Exception:
        return False
