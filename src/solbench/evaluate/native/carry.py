"""One evaluation's native build on the trusted side, done before the candidate starts (``evaluate.runner``).

``Carry`` is inert for languages without ``build_plan``. Otherwise it asks the language whether the solution
can be judged here (``unsupported``), takes its plan (flags not on the list are a ``compile_error``), and
obtains the solution's library and the trusted binding from the cache or builds them in the build's sandbox
(``native.build``, under SOLBENCH_COMPILE_TIMEOUT_S); a failed build is the evaluation's verdict (``failed``),
and the candidate is then never started. A built library is copied, read-only, into the candidate's private
directory with the binding, and the candidate is told their paths and sha256 (``env``); its loader checks both
before it loads them, so what runs is exactly what was checked here. ``linked`` is the library's vendor use,
read from the same verified bytes.
"""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from solbench.evaluate import build_cache
from solbench.evaluate.isolation.view import sandbox_view
from solbench.evaluate.native import build as native_build


def default_view(device: str, root: Path) -> dict[str, Any]:
    """The candidate's view of the filesystem (``isolation.view.sandbox_view``), with the build cache hidden too."""
    view = sandbox_view(None, device)
    return dict(view, hidden=sorted(set(view["hidden"]) | {str(root)}))


class Carry:
    def __init__(self, language: Any, solution: Any, device: str, private: Path | None, root: Path | None = None,
                 view: dict[str, Any] | None = None):
        """``private`` None: only build into the cache (``warm``), nothing installed for a candidate."""
        self.root = Path(root or build_cache.default_root())
        self.private = Path(private) if private is not None else None
        self.unsupported: str | None = None
        self.failed: dict[str, Any] | None = None  # a workload result: compile_error or reward_hack
        self.key: str | None = None
        self.timeout_s = 0.0
        self.env: dict[str, str] = {}
        self.linked: dict[str, str] | None = None
        self.report: dict[str, Any] | None = None
        if not hasattr(language, "build_plan"):
            return
        self.unsupported = language.unsupported_reason(solution, device)
        if self.unsupported:
            return
        try:
            plan = language.build_plan(solution, device)
        except ValueError as exc:  # compile_options outside the list
            self.failed = native_build.compile_error(str(exc)).failed
            return
        self.key, self.timeout_s = plan["key"], float(plan["timeout_s"])
        if view is None:
            view = default_view(device, self.root)
        built = self._obtain(plan, [(s.path, s.content) for s in solution.sources], view)
        if built is not None and self.private is not None:
            self._install(plan, *built)

    def _obtain(self, plan: dict[str, Any], files: list[tuple[str, str]], view: dict[str, Any]
                ) -> tuple[tuple[str, bytes], tuple[str, bytes]] | None:
        """The library and the trusted binding, each (file name, bytes), from the cache or built into it; None
        with ``failed`` set where either build failed."""
        deadline = time.monotonic() + self.timeout_s
        meta = {"language": plan.get("language"), "arch": plan.get("arch")}
        # the binding (once per toolchain and torch: about as long a build as the library's on a machine's first
        # solution) side by side with the library, not after it
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="solbench-binding") as beside:
            pending = beside.submit(self._binding, plan, view)
            outcome, lib, cached = build_cache.obtain(
                self.key, lambda work: native_build.library(plan, files, work, view, deadline), meta, self.root,
                wait_s=self.timeout_s + 60)
            b_out, binding, b_cached = pending.result()
        compile_s = outcome.compile_s if outcome is not None else self._meta(self.key).get("compile_s")
        self.report = {"key": self.key[:16], "cached": cached, "published": bool(lib and not cached),
                       "compile_s": round(compile_s, 3) if isinstance(compile_s, (int, float)) else None}
        if lib is None:
            self.failed = outcome.failed if outcome is not None and outcome.failed else \
                native_build.compile_error("the build left no library").failed
            return None
        if binding is None:
            self.failed = b_out.failed if b_out is not None else native_build.compile_error("no binding").failed
            return None
        self.report["binding_cached"] = b_cached
        return next(iter(lib.items())), next(iter(binding.items()))

    def _binding(self, plan: dict[str, Any], view: dict[str, Any]) -> tuple[Any, dict[str, bytes] | None, bool]:
        """The trusted binding from the cache, or built into it (``build_cache.obtain``'s triple)."""
        limit = max(self.timeout_s, 600)
        deadline = time.monotonic() + limit
        return build_cache.obtain(native_build.binding_key(plan),
                                  lambda work: native_build.binding(plan, work, view, deadline),
                                  {"kind": "binding"}, self.root, wait_s=limit + 60)

    def _install(self, plan: dict[str, Any], lib: tuple[str, bytes], binding: tuple[str, bytes]) -> None:
        """The verified bytes copied read-only into the candidate's private directory, and their paths and hashes
        for its loader."""
        (name, data), (bname, bdata) = lib, binding
        where = self.private / "build" / self.key
        where.mkdir(parents=True, exist_ok=True)
        for file, content in ((name, data), (bname, bdata)):
            (where / file).write_bytes(content)
            (where / file).chmod(0o444)
        self.env = {"SOLBENCH_BUILD_PLAN": json.dumps({
            "library": str(where / name), "sha256": native_build.sha256(data),
            "binding": str(where / bname), "binding_sha256": native_build.sha256(bdata),
            "language": plan.get("language"), "bytes_limit": native_build.MAX_BYTES})}
        from solbench.evaluate.integrity import linked

        self.linked = linked.library_use(data, name)
        self.report.update(sha256=native_build.sha256(data)[:16], bytes=len(data))

    def _meta(self, key: str) -> dict[str, Any]:
        return build_cache.read_meta(self.root / key)

    def __enter__(self) -> "Carry":
        return self

    def __exit__(self, *exc: Any) -> None:
        return None


def warm(language: Any, solution: Any, device: str, root: Path | None = None,
         view: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """The solution's library and binding built into the cache ahead of its evaluation (``pool``), in the same
    build sandbox (``view``), nothing installed: its build report (None for a language without builds), with the
    build's verdict where it failed."""
    carry = Carry(language, solution, device, None, root, view)
    if carry.report is None and carry.failed is None:
        return None
    return dict(carry.report or {}, failed=(carry.failed or {}).get("verdict"))
