"""The native build's sandbox: ``python -m solbench.evaluate.native.jail SPEC`` runs one command (ninja) in it.

Where the machine allows it, the same isolation as a candidate's (``namespaces``): new user, mount, network
and PID namespaces, every mount read-only, the temporary directories, the caches and the results database
hidden, the build's sources mounted read-only and its output directory the one writable place, no
capabilities. Everywhere, rlimits (no core files, bounded file sizes, address space and CPU time) and a scrubbed
environment. The command is the compilers' and the linker's work only: nothing of the solution runs, and the
result is never loaded here. The runner kills the whole process group (the namespace's process 1 with it)
past the compile limit.
"""

from __future__ import annotations

import json
import os
import resource
import sys
from typing import Any

FILE_BYTES = 1 << 30  # any one file the build writes
ADDRESS_BYTES = 32 << 30  # a compiler's address space (nvcc's cicc on CUTLASS takes several GiB)


def _limits(cpu_s: int) -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_BYTES, FILE_BYTES))
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_BYTES, ADDRESS_BYTES))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 5))


def run(spec: dict[str, Any]) -> int:
    """Isolate (where ``spec["namespaces"]``), limit, and exec ``spec["argv"]``; returns only on failure."""
    from solbench.evaluate.isolation import namespaces

    namespaces.die_with_parent(spec.get("parent"))  # the build's starter: a runner that ended meanwhile ends it
    if spec.get("namespaces"):
        namespaces.enter_namespaces()
        pid = os.fork()  # process 1 of the new PID namespace
        if pid:
            _, status = os.waitpid(pid, 0)
            return os.waitstatus_to_exitcode(status) & 0xFF
        namespaces.die_with_parent()
        namespaces.isolate(namespaces.View.from_dict(spec["view"]))
    _limits(int(spec.get("cpu_s") or 600))
    os.chdir(spec["cwd"])
    argv = [str(a) for a in spec["argv"]]
    os.execve(argv[0], argv, {str(k): str(v) for k, v in spec["env"].items()})
    return 127  # not reached


if __name__ == "__main__":
    try:
        code = run(json.loads(sys.argv[1]))
    except OSError as exc:  # the sandbox refused a step: say so; the build is a failure, never unsandboxed
        print(f"solbench: the build's sandbox could not be set up: {exc}", flush=True)
        code = 126
    os._exit(code)
