"""The candidate's system-call filter: what its process may ask of the kernel while the solution's code runs.

Installed with libseccomp (through ``pyseccomp``) in the candidate's process before any of the solution's code
runs (its import included: code run at import could otherwise load a filter of its own that refuses this one);
for a compiled language the rules against executable memory follow in a second filter once its verified library
is loaded. Irreversible, and inherited by every thread and child. A denied call fails with EPERM (clone3 with
ENOSYS, so the C library falls back to clone, which the filter can inspect). What code can do is decided here by
the system calls it makes, however it is spelled: an asm label, a hand-written ``syscall`` instruction or a
Python route all end at the same calls.

Profiles (``rules``):

- every candidate: no ``ptrace``, ``process_vm_readv/writev``, ``pidfd_getfd``/``pidfd_open``, ``kcmp``
  (reaching other processes); no ``bpf``, ``userfaultfd``, ``io_uring_*`` (io_uring's file operations bypass
  seccomp), ``perf_event_open``; no ``unshare``, ``setns``, ``mount``/``umount2``/``pivot_root``/``chroot``,
  ``keyctl``/``add_key``/``request_key``, kernel modules, ``kexec``, ``reboot``, ``personality``; no network
  sockets (``socket`` and ``socketpair`` of any family but AF_UNIX);
- **sealed** (the CPU, and compiled languages on any device): also no new threads (``clone`` with
  CLONE_THREAD), no new processes (``fork``, ``vfork``, ``clone``), no ``execve``/``execveat``; for a
  compiled language (``native``) also no executable memory made at run time (``mmap`` of anonymous memory or
  ``mprotect`` with PROT_EXEC; PyTorch's own CPU kernels JIT-compile through oneDNN, so a Python language on
  the CPU keeps it). A Python
  language on the GPU is not sealed: Triton compiles each new specialisation with ``ptxas`` (a process) and
  the profiler of the language proof starts threads (both measured on the H200, docs/SECURITY.md); there the
  static scan, the PID namespace and the trusted side's view of the process tree (``outside``) stand in.

Where libseccomp or the kernel's seccomp is missing, ``install`` says so and the evaluation carries the warning
``seccomp_unavailable``.
"""

from __future__ import annotations

import errno

try:  # loaded with the harness, before any solution exists
    import pyseccomp as _sc
except Exception as _exc:  # the package or libseccomp itself is missing
    _sc = None
    _MISSING = f"libseccomp is not available here ({type(_exc).__name__}: {_exc})"[:300]

CLONE_THREAD = 0x00010000
PROT_EXEC = 0x4
MAP_ANONYMOUS = 0x20
AF_UNIX = 1

#: reaching other processes, kernel facilities a kernel benchmark never needs, and ways around the filter
DENIED = ("ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "pidfd_open", "kcmp", "bpf",
          "userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register", "perf_event_open", "unshare",
          "setns", "mount", "umount2", "pivot_root", "chroot", "keyctl", "add_key", "request_key", "init_module",
          "finit_module", "delete_module", "kexec_load", "kexec_file_load", "reboot", "personality",
          "open_by_handle_at", "name_to_handle_at", "fsopen", "fsmount", "move_mount", "open_tree")
#: no new processes or programs once sealed
SEALED = ("fork", "vfork", "execve", "execveat")


def sealed(language_compiled: bool, device: str) -> bool:
    """Whether the sealed profile applies (see the module's docstring)."""
    return device == "cpu" or language_compiled


def rules(seal: bool, native: bool = False) -> list[tuple[str, int, tuple]]:
    """(system call, errno, argument conditions) for each denial: conditions are (index, op, value[, mask])."""
    out: list[tuple[str, int, tuple]] = [(name, errno.EPERM, ()) for name in DENIED]
    out += [("socket", errno.EPERM, ((0, "NE", AF_UNIX),)), ("socketpair", errno.EPERM, ((0, "NE", AF_UNIX),))]
    if seal:
        out += [(name, errno.EPERM, ()) for name in SEALED]
        out += [("clone", errno.EPERM, ()), ("clone3", errno.ENOSYS, ())]
    if seal and native:
        out += native_rules()
    else:
        out += [("clone3", errno.ENOSYS, ())]  # clone3's flags sit behind a pointer: glibc falls back to clone
    return out


def native_rules() -> list[tuple[str, int, tuple]]:
    """A compiled language's denials of executable memory made at run time (``rules``' ``native`` part)."""
    return [("mprotect", errno.EPERM, ((2, "MASKED_EQ", PROT_EXEC, PROT_EXEC),)),
            ("pkey_mprotect", errno.EPERM, ((2, "MASKED_EQ", PROT_EXEC, PROT_EXEC),)),
            ("mmap", errno.EPERM, ((2, "MASKED_EQ", PROT_EXEC, PROT_EXEC),
                                   (3, "MASKED_EQ", MAP_ANONYMOUS, MAP_ANONYMOUS)))]


def install(seal: bool, native: bool = False) -> str | None:
    """Load the filter into this process; returns None, or why it could not be loaded."""
    return _load(rules(seal, native))


def install_native() -> str | None:
    """Add the native rules (a second filter, stacked on the first: filters only ever add denials)."""
    return _load(native_rules())


def _load(denials: list[tuple[str, int, tuple]]) -> str | None:
    sc = _sc
    if sc is None:
        return _MISSING
    ops = {"NE": sc.NE, "EQ": sc.EQ, "MASKED_EQ": sc.MASKED_EQ}
    try:
        f = sc.SyscallFilter(defaction=sc.ALLOW)
        f.set_attr(sc.Attr.CTL_TSYNC, 1)  # every thread of the process, not only the caller
        for name, code, conds in denials:
            args = [sc.Arg(c[0], ops[c[1]], *c[2:]) for c in conds]
            try:
                f.add_rule(sc.ERRNO(code), name, *args)
            except Exception:  # a system call this kernel or architecture does not have
                continue
        f.load()
    except Exception as exc:
        return f"the seccomp filter could not be loaded: {type(exc).__name__}: {exc}"[:300]
    return None


_probed: dict[bool, bool] = {}


def available(seal: bool = True) -> bool:
    """``probe``, once per process."""
    if seal not in _probed:
        _probed[seal] = probe(seal)
    return _probed[seal]


def probe(seal: bool) -> bool:
    """Whether the filter loads here: a trial in a forked child that then tries to start a thread."""
    import os

    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            if install(seal) is None:
                code = 0
                if seal:
                    import threading

                    try:
                        threading.Thread(target=lambda: None).start()
                        code = 1  # sealed, yet a thread started
                    except RuntimeError:
                        code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == 0
