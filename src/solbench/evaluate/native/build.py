"""The trusted side's build of a native solution: compile, link, check, hash; nothing of it runs or is loaded.

``library`` builds a solution's library from the sources as submitted (never from a candidate's directory), in
the build's sandbox (``jail``) under the compile limit: each source compiled with solbench's prelude
force-included (``sources.PRELUDE``) and ``-ffunction-sections -fdata-sections``, then linked into one shared
library that exports only ``solbench_native_module`` (``sources.EXPORTS``) with ``--gc-sections``, so it holds
what the solution's code can reach and nothing else. The library's bytes are read once, with no link
followed, bounded by their apparent and allocated size; its imports are judged (``symbols``) from those bytes;
what is returned is those bytes and their sha256, which the cache publishes and every load checks.
``binding`` builds the trusted binding (``sources.BINDING``) the same way, once per toolchain and torch version.

A failure is an ``Outcome`` with a verdict: ``compile_error`` (the compiler's or linker's last lines, an
undefined reference, a flag not on the list) or ``reward_hack`` with the reason ``native_symbol`` (a denied
import, named with the objects that import it).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import stat
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from solbench.evaluate.native import sources as native_sources
from solbench.evaluate.native import symbols
from solbench.evaluate.native.toolchain import (host_flags, library_dirs, link_flags, nvcc_flags, object_name,
                                                  quote, search_path, tool, torch_dirs, write_ninja)

MAX_BYTES = 256 << 20  # one built library, by its apparent and its allocated size
_SAFE_PATH = re.compile(r"^[\w+-][\w.+/-]*$")


@dataclass
class Outcome:
    """A build's result: the library's bytes (by file name) or a verdict with its message."""

    files: dict[str, bytes] = field(default_factory=dict)
    verdict: str | None = None  # None: built; "compile_error" or "reward_hack"
    reasons: list[str] = field(default_factory=list)
    message: str = ""
    compile_s: float | None = None
    imports: list[str] = field(default_factory=list)

    @property
    def failed(self) -> dict[str, Any] | None:
        """The verdict as a workload result (``decision.judge`` reads it), or None."""
        if self.verdict is None:
            return None
        return {"verdict": self.verdict, "reasons": self.reasons or [self.verdict], "message": self.message}


def compile_error(message: str) -> Outcome:
    return Outcome(verdict="compile_error", reasons=["compile_error"], message=message)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


#: the imports probe (``_judged_imports``): the solution's objects linked alone
PROBE = "imports-probe.so"
PROBE_FLAGS = ("-Wl,--gc-sections", "-Wl,--version-script=exports.map")


# ---- running it ------------------------------------------------------------------------------------------
#: the builds running now, by the thread that waits for each, and the threads whose builds are cancelled
_RUNNING: dict[int, subprocess.Popen] = {}
_CANCELLED: set[int] = set()
_RUNNING_LOCK = threading.Lock()


def _end_build(proc: subprocess.Popen) -> None:
    """Kill a build's whole tree (its jail is a session of its own: a signal to the runner's group misses it)."""
    from solbench.evaluate.languages.cuda_toolchain import _kill_tree

    _kill_tree(proc.pid)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass


def cancel(threads: set[int]) -> int:
    """Kill the builds that the threads ``threads`` (their idents) wait for, and any they start until
    ``uncancel``: a run interrupted while its build pool works ends now, not once the compilers are done. Each
    such build is a failed one to its caller (never cached). How many were killed."""
    with _RUNNING_LOCK:
        _CANCELLED.update(threads)
        procs = [proc for ident, proc in _RUNNING.items() if ident in threads]
    for proc in procs:
        _end_build(proc)
    return len(procs)


def uncancel(threads: set[int]) -> None:
    """``threads`` have ended: a later thread given one of their idents builds as any other."""
    with _RUNNING_LOCK:
        _CANCELLED.difference_update(threads)


def run_jailed(out: Path, src: Path, view: dict[str, Any] | None, deadline: float,
               extra_readable: list[str]) -> tuple[int | None, str]:
    """ninja in ``out`` inside the build's sandbox; (exit code or None past the deadline, its output)."""
    from solbench.evaluate.isolation.namespaces import namespaces_available

    ninja = tool("ninja")
    if ninja is None:
        return 127, "ninja is not installed (pip install ninja)"
    env = {"PATH": search_path(), "HOME": str(out), "TMPDIR": str(out / "tmp"), "LANG": "C", "LC_ALL": "C"}
    (out / "tmp").mkdir(exist_ok=True)
    spec: dict[str, Any] = {"argv": [ninja, "-C", str(out)], "cwd": str(out), "env": env,
                            "cpu_s": max(10, int(deadline - time.monotonic()) + 10), "parent": os.getpid(),
                            "namespaces": bool(view is not None and namespaces_available())}
    if spec["namespaces"]:
        spec["view"] = {"private": str(out), "staged": str(src), "hidden": sorted(set(view.get("hidden", []))
                                                                                    | {"/dev/shm"}),
                        "readable": sorted(set(view.get("readable", [])) | set(extra_readable)), "writable": []}
    log = out / "build.log"
    with open(log, "wb") as f:
        proc = subprocess.Popen([sys.executable, "-m", "solbench.evaluate.native.jail", json.dumps(spec)],
                                stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.STDOUT, cwd=str(out),
                                env=dict(env, PYTHONPATH=str(Path(__file__).resolve().parents[3])),
                                start_new_session=True)
        with _RUNNING_LOCK:
            _RUNNING[threading.get_ident()] = proc
            cancelled = threading.get_ident() in _CANCELLED
        if cancelled:
            _end_build(proc)
        try:
            code: int | None = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            code = None
        finally:
            with _RUNNING_LOCK:
                _RUNNING.pop(threading.get_ident(), None)
        if code is None or proc.poll() is None:
            _end_build(proc)
            proc.wait()
    with open(log, "rb") as f:
        f.seek(max(0, os.path.getsize(log) - (1 << 20)))
        return code, f.read().decode(errors="replace")


def write_sources(src: Path, files: list[tuple[str, str]]) -> str | None:
    """The solution's files in ``src``; a message when a path is not one solbench builds."""
    for path, content in files:
        if not _SAFE_PATH.match(path) or ".." in Path(path).parts:
            return f"source path {path[:80]!r} has characters solbench does not build (letters, digits, . _ + - /)"
        target = src / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content)
        target.chmod(0o444)
    return None


def read_artefact(path: Path) -> bytes | str:
    """A built file's bytes (no link followed, a regular file, at most MAX_BYTES by apparent and allocated
    size), or why not."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        return f"the link made no library ({exc.strerror})"
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return "the built library is not a regular file"
        if max(st.st_size, st.st_blocks * 512) > MAX_BYTES:
            return f"the built library takes {max(st.st_size, st.st_blocks * 512) >> 20} MiB (over {MAX_BYTES >> 20})"
        return f.read(MAX_BYTES + 1)[:MAX_BYTES]


def library(plan: dict[str, Any], files: list[tuple[str, str]], work: Path, view: dict[str, Any] | None,
            deadline: float) -> Outcome:
    """Build, check and hash a solution's library in ``work`` (a fresh directory of the trusted side's)."""
    from solbench.evaluate.languages.cuda_toolchain import compiler_tail

    src, out = work / "src", work / "out"
    src.mkdir(parents=True)
    out.mkdir(parents=True)
    why = write_sources(src, files)
    if why:
        return compile_error(why)
    (out / "solbench_prelude.h").write_text(native_sources.PRELUDE)
    (out / "exports.map").write_text(native_sources.EXPORTS)
    cxx, nvcc = tool(os.environ.get("CXX", "c++")), plan.get("nvcc")
    host = host_flags(plan, src, out)
    rules = {"cxx": [quote(cxx or "c++"), *map(quote, host), "-c", "$in", "-o", "$out"],
             "cxx_of_cu": [quote(cxx or "c++"), *map(quote, host), "-x", "c++", "-c", "$in", "-o", "$out"],
             "link": [quote(cxx or "c++"), "-shared", "$in", *map(quote, link_flags(plan)), "-o", "$out"],
             "probe": [quote(cxx or "c++"), "-shared", "-nodefaultlibs", "$in", *PROBE_FLAGS, "-o", "$out"]}
    if nvcc:
        rules["nvcc"] = [quote(nvcc), *map(quote, nvcc_flags(plan, src, out)), "-c", "$in", "-o", "$out"]
    builds, objects = [], []
    for path in plan["sources"]:
        cuda = path.endswith(".cu")
        rule = "cxx" if not cuda else "nvcc" if nvcc and not plan.get("cuda_as_cpp") else "cxx_of_cu"
        builds.append((object_name(path), rule, [str(src / path)]))
        objects.append(object_name(path))
    target = f"{plan['name']}.so"
    builds += [(target, "link", objects), (PROBE, "probe", objects)]
    write_ninja(out, rules, builds, f"{target} {PROBE}")
    t0 = time.perf_counter()
    readable = [str(src), *(plan.get("include_paths") or []), *([plan["cuda_home"]] if plan.get("cuda_home") else [])]
    code, log = run_jailed(out, src, view, deadline, readable)
    compile_s = time.perf_counter() - t0
    if code is None:
        return Outcome(verdict="compile_error", reasons=["compile_error"], compile_s=compile_s,
                       message=f"the build did not finish within {plan.get('timeout_s', 0):g} s "
                               "(SOLBENCH_COMPILE_TIMEOUT_S)")
    if code != 0:
        return Outcome(verdict="compile_error", reasons=["compile_error"], compile_s=compile_s,
                       message="the build failed:\n" + compiler_tail(log, src))
    data = read_artefact(out / target)
    if isinstance(data, str):
        return Outcome(verdict="compile_error", reasons=["compile_error"], message=data, compile_s=compile_s)
    outcome = check(data, plan, out, objects)
    outcome.compile_s = compile_s
    if outcome.verdict is None:
        outcome.files = {target: data}
    return outcome


def check(data: bytes, plan: dict[str, Any], out: Path, objects: list[str]) -> Outcome:
    """Judge a built library's bytes: its table, its imports, the libraries it needs."""
    from solbench.evaluate.integrity import linked

    dyn = linked.parse(data)
    if dyn is None:
        return compile_error("the link made no ELF shared library")
    if native_sources.ENTRY not in dyn.defined:
        return compile_error("the extension exposes nothing: bind the entry point with PYBIND11_MODULE("
                             "TORCH_EXTENSION_NAME, m) { m.def(\"run\", &run); } (TORCH_LIBRARY is not supported)")
    undefined, resolved = _judged_imports(dyn, out / PROBE)
    found = symbols.judge(undefined, dyn.weak, dyn.needed, plan.get("language", "cuda_cpp"),
                          [Path(d) for d in library_dirs(plan.get("cuda_home"))], resolved)
    named = dict(zip(symbols.demangle(undefined), undefined))
    if found.denied:
        lines = [f"{_where(named.get(s, s), out, objects)} imports {s[:160]} ({why})" for s, why in found.denied[:8]]
        more = f" (and {len(found.denied) - 8} more)" if len(found.denied) > 8 else ""
        return Outcome(verdict="reward_hack", reasons=["native_symbol"], imports=found.imports,
                       message="the native library calls what a solution may not: " + "; ".join(lines) + more)
    if found.undefined:
        first = found.undefined[0]
        return Outcome(verdict="compile_error", reasons=["compile_error"], imports=found.imports,
                       message=f"undefined reference to {first[:200]} ({_where(named.get(first, first), out, objects)})"
                               + (f" and {len(found.undefined) - 1} more" if len(found.undefined) > 1 else ""))
    return Outcome(imports=found.imports)


def _judged_imports(dyn, probe: Path) -> tuple[list[str], set[str]]:
    """(the imports to judge, those of them the link resolved inside the library). Where the compiler links its
    C++ runtime statically (no ``libstdc++.so`` among the needed libraries: a toolchain configured so, as the
    H200 machine's /opt/gcc), the library also imports what that runtime calls (files, locales, ``syscall``),
    which the solution reaches only through the runtime's functions it calls itself. Then the judged imports are
    those of the probe: the same objects linked with the same section collection and exports but no library at
    all, so that everything the kept code calls stays an import, the C++ runtime's functions included (those
    the real link resolved inside the library exist: ``resolved``)."""
    from solbench.evaluate.integrity import linked

    if any(n.startswith("libstdc++") for n in dyn.needed):
        return list(dyn.undefined), set()
    data = read_artefact(probe) if probe.is_file() else ""
    probed = linked.parse(data) if isinstance(data, bytes) else None
    if probed is None:
        return list(dyn.undefined), set()
    return list(probed.undefined), set(probed.undefined) - set(dyn.undefined)


def _where(raw: str, out: Path, objects: list[str]) -> str:
    """The objects whose symbol tables import ``raw``."""
    from solbench.evaluate.integrity import linked

    holders = []
    for name in objects:
        data = read_artefact(out / name) if (out / name).is_file() else ""
        if isinstance(data, bytes) and raw in linked.object_imports(data):
            holders.append(name)
    return ", ".join(holders) if holders else "the library"


def binding(plan: dict[str, Any], work: Path, view: dict[str, Any] | None, deadline: float) -> Outcome:
    """Build the trusted binding (a Python extension module) in ``work``."""
    from solbench.evaluate.languages.cuda_toolchain import compiler_tail

    src, out = work / "src", work / "out"
    src.mkdir(parents=True)
    out.mkdir(parents=True)
    (out / "solbench_prelude.h").write_text(native_sources.PRELUDE)
    (src / "binding.cpp").write_text(native_sources.BINDING)
    t = torch_dirs()
    cxx = tool(os.environ.get("CXX", "c++")) or "c++"
    flags = ["-O2", "-fPIC", t["std"], t["abi"], "-I", str(out), *[a for d in t["include"] for a in ("-isystem", d)],
             "-isystem", t["python_include"]]
    rules = {"cxx": [quote(cxx), *map(quote, flags), "-c", "$in", "-o", "$out"],
             "link": [quote(cxx), "-shared", "$in", f"-L{t['lib']}", "-lc10", "-ltorch_cpu", "-ltorch", "-ltorch_python",
                      "-o", "$out"]}
    target = f"{native_sources.BINDING_MODULE}.so"
    write_ninja(out, rules, [("binding.o", "cxx", [str(src / "binding.cpp")]), (target, "link", ["binding.o"])], target)
    t0 = time.perf_counter()
    code, log = run_jailed(out, src, view, deadline, [str(src)])
    if code != 0:
        return Outcome(verdict="compile_error", reasons=["compile_error"], compile_s=time.perf_counter() - t0,
                       message="solbench's binding did not build: " + compiler_tail(log or "timeout", src))
    data = read_artefact(out / target)
    if isinstance(data, str):
        return compile_error("solbench's binding: " + data)
    return Outcome(files={target: data}, compile_s=time.perf_counter() - t0)


def binding_key(plan: dict[str, Any]) -> str:
    """The binding's cache key: solbench's sources, the build's steps and flags (this module and ``toolchain``),
    the toolchain, torch and Python."""
    from solbench.evaluate.languages.cuda_toolchain import toolchain
    from solbench.evaluate.native import toolchain as flags_of

    steps = sha256(Path(__file__).read_bytes() + Path(flags_of.__file__).read_bytes())
    parts = {"format": "solbench-binding-1", "sources": native_sources.digest(), "steps": steps,
             "torch": plan.get("torch_version"), "toolchain": toolchain(False), "dirs": torch_dirs()}
    return "binding-" + hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()
