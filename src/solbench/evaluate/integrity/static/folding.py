"""Constant folding of string expressions for the Python scan: the string a name is built from (``"thr" +
"eading"``, ``"".join([...])``, ``chr(...)``, ``s[::-1]``, f-strings), the constants a name can be, and whether a
string is assembled at run time. Mixed into ``names.NameResolver``, whose ``resolve`` and ``assigned`` it uses.
"""

from __future__ import annotations

import ast

#: calls that decode bytes or strings (a name built through one is assembled at run time)
DECODERS = frozenset(
    "base64.b64decode base64.b32decode base64.b16decode base64.a85decode base64.b85decode base64.decodebytes "
    "base64.urlsafe_b64decode base64.standard_b64decode base64.decodestring base64.b32hexdecode zlib.decompress "
    "gzip.decompress lzma.decompress bz2.decompress codecs.decode binascii.unhexlify binascii.a2b_base64 "
    "binascii.a2b_hex binascii.a2b_uu binascii.a2b_qp bytes.fromhex bytearray.fromhex marshal.loads "
    "pickle.loads zipfile.ZipFile".split()
)
STR_BUILDERS = frozenset({"join", "format", "replace", "decode", "lower", "upper", "swapcase", "title",
                          "capitalize", "strip", "lstrip", "rstrip", "translate", "encode", "format_map"})


class Folding:
    """The folding of one file's string expressions, on its resolver's names and bindings."""

    def fold(self, node: ast.AST, depth: int = 0) -> str | None:
        if depth > 6:
            return None
        t = type(node)
        if t is ast.Constant:
            return node.value if isinstance(node.value, str) else None
        if t is ast.BinOp and isinstance(node.op, ast.Add):
            a, b = self.fold(node.left, depth + 1), self.fold(node.right, depth + 1)
            return a + b if a is not None and b is not None else None
        if t is ast.JoinedStr:
            parts = []
            for v in node.values:
                p = self.fold(v.value if isinstance(v, ast.FormattedValue) else v, depth + 1)
                if p is None:
                    return None
                parts.append(p)
            return "".join(parts)
        if t is ast.Subscript and isinstance(node.slice, ast.Slice):
            s = self.fold(node.value, depth + 1)
            sl = node.slice
            try:
                bounds = [None if x is None else ast.literal_eval(x) for x in (sl.lower, sl.upper, sl.step)]
                return s[slice(*bounds)] if s is not None else None
            except Exception:
                return None
        if t is ast.Call:
            f = node.func
            if isinstance(f, ast.Name) and f.id == "chr" and len(node.args) == 1:
                try:
                    return chr(ast.literal_eval(node.args[0]))
                except Exception:
                    return None
            if isinstance(f, ast.Name) and f.id in ("reversed", "str") and len(node.args) == 1:
                s = self.fold(node.args[0], depth + 1)
                return s[::-1] if (s is not None and f.id == "reversed") else s
            if isinstance(f, ast.Attribute) and f.attr == "join" and len(node.args) == 1:
                sep = self.fold(f.value, depth + 1)
                arg = node.args[0]
                if sep is None:
                    return None
                if isinstance(arg, (ast.List, ast.Tuple)):
                    parts = [self.fold(e, depth + 1) for e in arg.elts]
                    return None if None in parts else sep.join(parts)
                s = self.fold(arg, depth + 1)
                return sep.join(s) if s is not None else None
            if isinstance(f, ast.Attribute) and f.attr in ("replace", "lower", "upper", "strip", "format"):
                s = self.fold(f.value, depth + 1)
                args = [self.fold(a, depth + 1) for a in node.args]
                if s is None or None in args or node.keywords:
                    return None
                try:
                    return getattr(s, f.attr)(*args)
                except Exception:
                    return None
        if t is ast.Name:
            vals = self.assigned(node.id)
            if len(vals) == 1:
                return self.fold(vals[0], depth + 1)
        return None

    def constants(self, node: ast.AST) -> set[str] | None:
        """The constant strings an expression can be (a folded constant, or a name bound only to constants or
        looping over a display of constants); None where it is computed."""
        s = self.fold(node)
        if s is not None:
            return {s}
        if type(node) is ast.IfExp:
            a, b = self.constants(node.body), self.constants(node.orelse)
            return a | b if a is not None and b is not None else None
        if type(node) is not ast.Name:
            return None
        vals = self.assigned(node.id)
        if not vals:
            return None
        out: set[str] = set()
        for v in vals:
            elts = v.elts if type(v) in (ast.Tuple, ast.List, ast.Set) else v.keys if type(v) is ast.Dict else [v]
            for e in elts:
                c = self.fold(e) if e is not None else None
                if c is None:
                    return None
                out.add(c)
        return out

    def built(self, node: ast.AST, depth: int = 0) -> bool:
        """Whether a string expression is assembled at run time (not a plain constant)."""
        if depth > 4:
            return False
        t = type(node)
        if t is ast.Constant or t is ast.Attribute:
            return False
        if t is ast.BinOp:
            return isinstance(node.op, (ast.Add, ast.Mod, ast.Mult))
        if t is ast.JoinedStr:
            return True
        if t is ast.Subscript:
            return isinstance(node.slice, ast.Slice) or self.built(node.value, depth + 1)
        if t is ast.Call:
            f = node.func
            if isinstance(f, ast.Attribute) and f.attr in STR_BUILDERS:
                return True
            r = self.resolve(f)
            return r in ("chr", "reversed", "bytes", "str", "bytearray") or (r in DECODERS if r else False)
        if t is ast.Name:
            return any(self.built(v, depth + 1) for v in self.assigned(node.id))
        return False
