"""The Python scanner core: one pre-pass for names, then one walk over the tree that dispatches every node to
the checks registered for it (rules.py)."""

from __future__ import annotations

import ast
import re
from functools import partial

from .modules import NO_OWN, Own, Reach, module_name, reach
from .names import MODULE_NS, NameResolver, norm
from .rules import (
    CHECKS,
    NAME_FILTERS,
    REJECT,
    RULES,
    SETUPS,
    Finding,
    Policy,
    on_call,
    one_line,
    rule,
    rules_for,
)
from .tree import chain_inner

rule("unscannable", REJECT, "A source the scanner cannot analyse (nesting too deep) could hide anything.")

PY_LANGS = frozenset({"pytorch", "python", "torch"})


class PyScanner(NameResolver):
    """One Python file: the name pre-pass, the per-file setup of the check modules, then one visit."""

    def __init__(self, path: str, tree: ast.Module, language: str, policy: Policy, offset: int, depth: int,
                 source: str = "", own: Own = NO_OWN):
        super().__init__(tree, module_name(path), path.endswith("__init__.py"))
        self.path = path
        #: the solution's own modules (modules.py)
        self.own = own
        self._reaches: dict[str, Reach] = {}
        self._prepassed = False
        self.language = language
        self.dsl = language not in PY_LANGS
        self.policy = policy
        self.offset = offset
        self.depth = depth
        self.source = source
        self.findings: list[Finding] = []
        self._hints: dict[re.Pattern[str], bool] = {}

    # ---- findings

    def add(self, rule_name: str, node: ast.AST | int, message: str) -> None:
        line = node if isinstance(node, int) else getattr(node, "lineno", 1)
        self.findings.append(Finding(rule_name, RULES[rule_name].severity, self.path, line + self.offset,
                                     one_line(message, 160)))

    def hint(self, rx: re.Pattern[str], words: tuple[str, ...] = ()) -> bool:
        """Whether the file's text matches ``rx`` (a gate for checks that rarely apply). ``words``, when given,
        must include a substring of every match: the regex then only runs on a text holding one of them."""
        h = self._hints.get(rx)
        if h is None:
            src = self.source
            h = self._hints[rx] = (not words or any(w in src for w in words)) and bool(rx.search(src))
        return h

    # ---- the visit

    def prepass(self) -> None:
        if not self._prepassed:
            self._prepassed = True
            super().prepass()

    def reach(self, name: str) -> Reach:
        """Where a resolved dotted name leads (modules.py): the last module along it and what follows."""
        r = self._reaches.get(name)
        if r is None:
            r = self._reaches[name] = reach(name, self.own, self.known)
        return r

    def run(self) -> list[Finding]:
        self.prepass()
        for fn in SETUPS:
            fn(self)
        handlers = self._dispatch()
        for node in self.order:
            h = handlers.get(type(node))
            if h is not None:
                self.cur = node._sb_scope
                h(node)
        return self.findings

    def _dispatch(self) -> dict[type, object]:
        """This file's dispatch tables, from the registered checks whose ``when`` holds here."""
        nodes: dict[type, list] = {}
        self.t_calls: list = []
        self.t_named_calls: dict[str, list] = {}
        self.t_attrs: dict[str, list] = {}
        self.t_idents: list = []
        self.t_strings: list = []
        self.t_targets: dict[type, list] = {}
        self.t_names: list = []
        for c in CHECKS:
            if c.kind == "cpp" or (c.when is not None and not c.when(self)):
                continue
            k = c.kind
            if k == "node":
                for t in c.keys:
                    nodes.setdefault(t, []).append(c.func)
            elif k == "call":
                if c.keys:
                    for n in c.keys:
                        self.t_named_calls.setdefault(n, []).append(c.func)
                else:
                    self.t_calls.append(c.func)
            elif k == "attr":
                for a in c.keys:
                    self.t_attrs.setdefault(a, []).append(c.func)
            elif k == "ident":
                self.t_idents.append(c.func)
            elif k == "string":
                self.t_strings.append(c.func)
            elif k == "target":
                for t in c.keys or (ast.Attribute, ast.Subscript, ast.Name):
                    self.t_targets.setdefault(t, []).append(c.func)
            elif k == "name":
                self.t_names.append(c.func)
        core = {ast.Import: self._import, ast.ImportFrom: self._import_from, ast.Name: self._name,
                ast.Attribute: self._attribute, ast.Subscript: self._subscript, ast.Call: self._call,
                ast.Constant: self._constant,
                ast.Assign: self._assign, ast.AugAssign: self._aug_assign, ast.AnnAssign: self._ann_assign,
                ast.Delete: self._delete}
        handlers: dict[type, object] = {}
        for t in set(core) | set(nodes):
            fns = [core[t]] if t in core else []
            fns += [partial(f, self) for f in nodes.get(t, ())]
            handlers[t] = fns[0] if len(fns) == 1 else partial(_run_all, fns)
        return handlers

    # ---- resolved names and identifiers

    def check_name(self, name: str, node: ast.AST, what: str = "uses", depth: int = 0) -> None:
        """Report every rule the name table gives for a resolved dotted name, then run the name checks; a name
        whose chain passes through another module (``torch.sys.settrace``, ``helper.torch.load``) is checked as
        the name it reaches as well (``sys.settrace``, ``torch.load``)."""
        for r in rules_for(name):
            skip = NAME_FILTERS.get(r)
            if skip is not None and skip(name, what):
                continue
            self.add(r, node, f"{what} {name}")
        for fn in self.t_names:
            fn(self, name, node, what)
        if "." in name and depth < 3:
            canonical = self.reach(name).name
            if canonical and canonical != name:
                self.check_name(canonical, node, what, depth + 1)

    def check_ident(self, ident: str, node: ast.AST) -> None:
        for fn in self.t_idents:
            fn(self, ident, node)

    def _import(self, node: ast.Import) -> None:
        for a in node.names:
            self.check_name(a.name, node, "imports")
            self.check_ident(a.asname or a.name.rsplit(".", 1)[-1], node)

    def _import_from(self, node: ast.ImportFrom) -> None:
        if node.level or not node.module:
            return
        self.check_name(node.module, node, "imports")
        for a in node.names:
            if a.name != "*":
                self.check_name(f"{node.module}.{a.name}", node, "imports")
                self.check_ident(a.name, node)

    def _name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Load):
            if not chain_inner(node):
                r = self.resolve(node)
                if r:
                    self.check_name(r, node)
            for fn in self.t_idents:
                fn(self, node.id, node)

    def _attribute(self, node: ast.Attribute) -> None:
        attr = node.attr
        for fn in self.t_attrs.get(attr, ()):
            fn(self, node)
        for fn in self.t_idents:
            fn(self, attr, node)
        if not chain_inner(node):  # the outermost link of a dotted chain checks all its prefixes
            r = self.resolve(node)
            if r:
                self.check_name(r, node)

    def _subscript(self, node: ast.Subscript) -> None:
        """``sys.modules["gc"]``, ``vars(m)["x"]``, ``__builtins__["exec"]``: a lookup in a module namespace is the
        name it reaches."""
        if isinstance(node.ctx, ast.Load) and not chain_inner(node):
            r = self.resolve(node)
            if r and r != MODULE_NS:
                self.check_name(r, node)

    # ---- calls, constants, assignments

    def _call(self, node: ast.Call) -> None:
        r = self.resolve(node.func)
        if r and "." in r:  # the callee by its real name: ``F.importlib.import_module`` is ``importlib.import_module``
            r = self.reach(r).name or r
        if r:
            for fn in self.t_named_calls.get(r, ()):
                fn(self, node, r)
        for fn in self.t_calls:
            fn(self, node, r)

    def _constant(self, node: ast.Constant) -> None:
        v = node.value
        if isinstance(v, bytes):
            try:
                v = v.decode("latin-1")
            except Exception:  # pragma: no cover
                return
        if not isinstance(v, str) or not v:
            return
        for fn in self.t_strings:
            fn(self, node, v)

    def check_target(self, tgt: ast.AST, value: ast.AST | None, anchor: ast.AST) -> None:
        if isinstance(tgt, (ast.Tuple, ast.List)):
            for e in tgt.elts:
                self.check_target(e, None, anchor)
            return
        if isinstance(tgt, ast.Starred):
            self.check_target(tgt.value, None, anchor)
            return
        for fn in self.t_targets.get(type(tgt), ()):
            fn(self, tgt, value, anchor)

    def _assign(self, node: ast.Assign) -> None:
        for tgt in node.targets:
            self.check_target(tgt, node.value, node)

    def _aug_assign(self, node: ast.AugAssign) -> None:
        self.check_target(node.target, node.value, node)

    def _ann_assign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self.check_target(node.target, node.value, node)

    def _delete(self, node: ast.Delete) -> None:
        for tgt in node.targets:
            self.check_target(tgt, None, node)

    # ---- code inside string constants

    def scan_embedded(self, const: ast.Constant) -> None:
        """Parse a constant passed to exec/eval/compile and scan it as part of this file."""
        if self.depth >= 3 or len(const.value) > 200_000:
            return
        try:
            tree = ast.parse(const.value)
        except (SyntaxError, ValueError):
            return
        sub = PyScanner(self.path, tree, "pytorch" if not self.dsl else "triton", self.policy,
                        self.offset + const.lineno - 1, self.depth + 1, const.value, self.own)
        self.findings.extend(sub.run())


def _run_all(fns: list, node: ast.AST) -> None:
    for fn in fns:
        fn(node)


@on_call("*", "getattr")
def resolved_getattr(s: PyScanner, node: ast.Call, r: str) -> None:
    """``getattr(m, "const")`` is the name ``m.const``: the name table applies to it (and to ``m.a``, ``m.b`` for a
    name that loops over the constants ``("a", "b")``)."""
    if len(node.args) >= 2:
        full = s.resolve(node)
        if full:
            s.check_name(full, node)
        else:
            base = s.resolve(node.args[0])
            consts = s.constants(node.args[1]) if base else None
            for name in sorted(consts or ()):
                s.check_name(norm(f"{base}.{name}"), node)


_RESOLVING_CALLS = frozenset({"vars", "dict", "types.MappingProxyType", "collections.ChainMap",
                              "collections.OrderedDict", "copy.copy"})


@on_call("*")
def resolved_call(s: PyScanner, node: ast.Call, r: str | None) -> None:
    """A call that reaches a module's name (``vars(sys).get("settrace")``, ``dict(sys.modules)``,
    ``operator.attrgetter("modules")(sys)``) is that name: the name table applies to it."""
    f = node.func
    if not (r in _RESOLVING_CALLS or type(f) is ast.Call
            or (type(f) is ast.Attribute and f.attr in ("get", "__getitem__", "copy"))):
        return
    full = s.resolve(node)
    if full and full != MODULE_NS:
        s.check_name(full, node)
