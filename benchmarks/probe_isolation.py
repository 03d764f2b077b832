"""Which step of a candidate's isolation (evaluate/isolation/namespaces.py) a machine's GPU stack tolerates: each set of steps
runs in a fresh child (new user, mount, network and PID namespaces), then the child initialises CUDA through
torch and runs a kernel, or (--ipc) opens a CUDA IPC handle of this process's, as a candidate opens its arena.
Prints one line per set: ok, or the error.

Usage: python benchmarks/probe_isolation.py [--device cuda|cpu] [--ipc]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import traceback

from solbench.evaluate.isolation import namespaces as iso

STEPS = {
    "namespaces": [],
    "proc": ["proc"],
    "proc_ro": ["proc_ro"],
    "mounts_ro": ["proc", "mounts_ro"],
    "hide_tmp": ["proc", "hide_tmp"],
    "hide_shm": ["proc", "hide_shm"],
    "caps": ["caps"],
    "proc_guard": ["proc_guard"],
    "proc_caps": ["proc", "caps"],
    "seal": ["seal"],
    "seal_caps": ["seal", "caps"],
    "seal_shm": ["seal_shm"],
    "seal_shm_caps": ["seal_shm", "caps"],
    "mounts_ro_shm_ro": ["proc_guard", "mounts_ro"],
    "mounts_ro_caps": ["proc_guard", "mounts_ro", "caps"],
}


def _step(name: str, view: iso.View) -> None:
    if name in ("proc", "proc_ro"):
        iso._mount(None, "/", None, iso.MS_REC | iso.MS_PRIVATE, None, "make private")
        flags = iso.MS_NOSUID | iso.MS_NODEV | iso.MS_NOEXEC | (iso.MS_RDONLY if name == "proc_ro" else 0)
        iso._mount(b"proc", "/proc", b"proc", flags, None, "mount")
    elif name == "mounts_ro":
        for point in iso.mount_points():
            if not point.startswith("/proc"):
                try:
                    iso._read_only(point)
                except OSError as exc:
                    print(f"    (could not make {point} read-only: {exc})", flush=True)
    elif name in ("hide_tmp", "hide_shm"):
        target = "/dev/shm" if name == "hide_shm" else tempfile.gettempdir()
        iso._mount(b"tmpfs", target, b"tmpfs", iso.MS_NOSUID | iso.MS_NODEV, b"size=64k,mode=755", "hide")
    elif name == "proc_guard":
        iso._mount(None, "/", None, iso.MS_REC | iso.MS_PRIVATE, None, "make private")
        iso.mount_proc()
    elif name == "caps":
        iso.drop_capabilities()
    elif name == "seal":
        iso.seal_filesystem(view)
    elif name == "seal_shm":  # /dev/shm left as it is, as on the GPU
        iso.seal_filesystem(iso.View(view.private, view.staged, [h for h in view.hidden if h != "/dev/shm"],
                                     view.readable, writable=["/dev/shm"]))


def _child(steps: list[str], view: iso.View, device: str, handle_fd: int | None = None) -> int:
    try:
        iso.enter_namespaces()
        pid = os.fork()
        if pid:
            _, status = os.waitpid(pid, 0)
            return os.waitstatus_to_exitcode(status)
        code = 1
        try:
            for s in steps:
                _step(s, view)
            import torch

            if handle_fd is not None:  # open the parent's arena as a candidate does
                from solbench.evaluate.boundary.arena import attach

                data = b""
                while not data.endswith(b"\n"):
                    chunk = os.read(handle_fd, 1 << 16)
                    if not chunk:
                        raise RuntimeError("no handle")
                    data += chunk
                import json

                buf = attach(json.loads(data))
                assert int(buf[:16].sum()) == 16 * 7
            else:
                x = torch.ones(1024, device=device)
                assert float((x * 2).sum()) == 2048.0
            code = 0
        except BaseException as exc:
            print(f"    {type(exc).__name__}: {str(exc)[:300]}", flush=True)
        os._exit(code)
    except BaseException:
        traceback.print_exc()
        return 1


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--ipc", action="store_true")
    args = ap.parse_args()
    root = tempfile.mkdtemp(prefix="solbench-probe-iso-")
    staged, private = os.path.join(root, "solution"), os.path.join(root, "tmp")
    os.makedirs(staged)
    os.makedirs(private)
    view = iso.View(private=private, staged=staged, hidden=[tempfile.gettempdir(), "/tmp", "/var/tmp", "/dev/shm"],
                    readable=[p for p in sys.path if p and os.path.isdir(p)])
    if args.ipc:  # children first, then this process's CUDA context and the arena they open
        kids = []
        for name, steps in STEPS.items():
            r, w = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(w)
                os._exit(_child(steps, view, args.device, r))
            os.close(r)
            kids.append((name, pid, w))
        import json

        import torch

        from solbench.evaluate.boundary.arena import Arena

        arena = Arena(1 << 20, torch.device(args.device), private)
        arena.buf.fill_(7)
        if args.device != "cpu":
            torch.cuda.synchronize()
        for name, pid, w in kids:
            os.write(w, (json.dumps(arena.handle) + "\n").encode())
        for name, pid, w in kids:
            _, status = os.waitpid(pid, 0)
            print(f"ipc {name:16s} {'ok' if os.waitstatus_to_exitcode(status) == 0 else 'FAILED'}", flush=True)
        return 0
    for name, steps in STEPS.items():
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            os._exit(_child(steps, view, args.device))
        _, status = os.waitpid(pid, 0)
        print(f"{name:12s} {'ok' if os.waitstatus_to_exitcode(status) == 0 else 'FAILED'}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
