"""The zygote: a process that has imported torch (and Triton on the GPU) but has no CUDA context, from which the
trusted worker forks each candidate's process in milliseconds instead of paying ``import torch`` per solution.

The trusted worker starts it before it reads any job, so it holds no secret; each child it forks sets itself up
as ``sandbox._candidate_child`` does (namespaces, ``namespaces``, rlimits) before it imports the solution.
"""

from __future__ import annotations

import json
import os
import signal

from solbench.evaluate.isolation.sandbox import SandboxSpec, _candidate_child, _close_fds_but


class Zygote:
    """A process that has imported torch and Triton (no CUDA context yet) and forks candidate processes.

    Importing torch takes seconds (about 4 s on the H200 machine); a fork takes milliseconds. The trusted
    worker starts the zygote before it creates its own CUDA context, and asks it for one candidate process
    per solution. Each one is set up as the ``unshare`` command would: new user, mount, network and PID
    namespaces, the staged solution mounted read-only, a private /proc, the process group killed as one.
    """

    def __init__(self, namespaces: bool):
        import socket

        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        pid = os.fork()
        if pid == 0:  # the zygote
            parent.close()
            try:
                _zygote_serve(child, namespaces)
            finally:
                os._exit(0)
        child.close()
        self.pid = pid
        self.sock = parent
        # the zygote tries the isolation once: where the kernel refuses a step, candidates run on rlimits alone
        # (and evaluations say so) rather than failing to start
        self.namespaces = self.sock.recv(1) == b"1"

    def spawn(self, spec: SandboxSpec, cmd_r: int, reply_w: int, log_fd: int) -> int:
        """Fork a candidate process with these pipes; returns its process id (also its process group)."""
        import socket

        msg = json.dumps(dict(spec.to_dict(), namespaces=self.namespaces and spec.namespaced)).encode()
        socket.send_fds(self.sock, [len(msg).to_bytes(4, "little") + msg], [cmd_r, reply_w, log_fd])
        data = b""
        while not data.endswith(b"\n"):
            chunk = self.sock.recv(64)
            if not chunk:
                raise OSError("the zygote is gone")
            data += chunk
        return int(data)

    def close(self) -> None:
        try:
            self.sock.close()
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        except (OSError, ChildProcessError):
            pass


def _zygote_serve(sock, isolate: bool) -> None:
    import socket

    from solbench.evaluate.isolation import namespaces

    namespaces.die_with_parent()  # the trusted worker's end is the zygote's
    _close_fds_but({sock.fileno()})  # nothing of the trusted worker's (its result pipe above all) stays open
    try:  # the imports a candidate needs, paid once (the trusted worker imported the harness already)
        import torch  # noqa: F401

        if os.environ.get("SOLBENCH_WORKER_DEVICE", "cpu") != "cpu":
            # not on the CPU: there TRITON_INTERPRET must be set before Triton is first imported
            try:
                import triton  # noqa: F401
            except ImportError:
                pass
    except Exception:
        pass
    sock.sendall(b"1" if isolate and namespaces.probe() else b"0")
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the kernel
    while True:
        try:
            head, fds, _, _ = socket.recv_fds(sock, 4, 8)
        except OSError:
            return
        if len(head) < 4:
            return
        n = int.from_bytes(head, "little")
        body = b""
        while len(body) < n:
            chunk = sock.recv(n - len(body))
            if not chunk:
                return
            body += chunk
        spec = json.loads(body)
        pid = os.fork()
        if pid == 0:
            sock.close()
            code = 1
            try:
                code = _candidate_child(spec, *fds)
            except BaseException:
                import traceback

                traceback.print_exc()
            finally:
                os._exit(code)
        for fd in fds:
            os.close(fd)
        sock.sendall(f"{pid}\n".encode())
