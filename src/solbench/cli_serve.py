"""``solbench serve`` (the evaluation service on this host's devices) and ``solbench token`` (its API tokens)."""

from __future__ import annotations

import ipaddress
import sys
from pathlib import Path
from typing import Optional

import typer

from solbench.cli_options import DbOption, out
from solbench.errors import UserError
from solbench.guard import GuardedTyper


class _Token(GuardedTyper):
    prefix = "token"


#: how often the service's threads hand over the interpreter's lock (``quick_handover``)
SWITCH_S = 0.001

token_app = _Token(no_args_is_help=True, help="The evaluation service's API tokens (stored hashed).")


def serve(
    host: str = typer.Option("127.0.0.1", help="address to listen on"),
    port: int = typer.Option(8000, min=1, max=65535),
    db: Path = DbOption,
    device: str = typer.Option("auto", help="auto (every GPU, else the CPU), cpu or cuda"),
    gpus: Optional[str] = typer.Option(None, help="the GPUs to serve: all (default), a count, or indices such as 0,2"),
    slots: int = typer.Option(1, min=1, help="CPU slots where the service evaluates on the CPU"),
    executor: str = typer.Option("local", help="local (a slot process per device of this host) or ray"),
    address: Optional[str] = typer.Option(None, help="--executor ray: the cluster to join"),
    open_access: bool = typer.Option(False, "--open", help="no token needed (loopback addresses only)"),
) -> None:
    """Serve evaluations over HTTP: POST /v1/evaluations, GET /v1/evaluations/ID?wait=30, /health, /metrics,
    /docs (docs/SERVICE.md)."""
    import uvicorn

    from solbench.cli_schedule import executor_for
    from solbench.evaluate.native import pool
    from solbench.schedule import builds
    from solbench.schedule.queue import JobQueue
    from solbench.schedule.scheduler import Scheduler
    from solbench.service.app import create_app
    from solbench.service.tokens import Tokens

    if executor not in ("local", "ray"):
        raise UserError(f"unknown executor {executor!r}: use local or ray")
    if open_access and not _loopback(host):
        raise UserError(f"--open serves without tokens: only on a loopback address, not {host}")
    if not open_access and not Tokens(db).any():
        raise UserError(f"no API token in {db}: make one with `solbench token add NAME --db {db}`, or serve "
                        "--open on loopback")
    ex = executor_for(executor, dict(device=device, gpus=gpus, slots=slots, address=address), db)
    queue = JobQueue(db)
    sched = Scheduler(queue, ex)
    own, cores = _split_cores(len(ex.slots)) if executor == "local" else (set(), set())  # Ray: a node's own
    back = sched.start()  # before the port opens: a second service on this database ends here, in one line
    # in a process of their own: a build's Python side could hold this process's interpreter lock under requests
    ahead = builds.start_apart(db, ex.slots[0].device, len(cores), cores, Path(f"{db}.builds.log")) if cores else None
    # this thread (uvicorn's event loop, and the threads it starts) moves to a core of its own: requests are not
    # answered late behind an evaluation's busy processes, nor run where a timing runs; the slots' threads,
    # started above, keep the evaluation's cores
    try:
        pool.confine(own)
        out.print(f"solbench serve: {len(ex.slots)} slot(s) ({', '.join(s.name for s in ex.slots)}), {db}"
                  + (f"; {len(back)} job(s) left running by a previous service put back" if back else "")
                  + (f"; native builds ahead on {len(cores)} core(s)" if cores else ""))
        app = create_app(db, sched, open_access=open_access, device=ex.slots[0].device)
        quiet_collector()
        quick_handover()
        uvicorn.run(app, host=host, port=port, log_level="warning")
    finally:
        if ahead is not None:
            builds.stop_apart(ahead)


def _split_cores(slots: int) -> tuple[set[int], set[int]]:
    """(the HTTP server's core, the cores for builds ahead) of those the slots leave (``evaluate.native.pool.
    slot_split``: at least four, two per slot, are the slots'); this thread, and so the slots' threads and the
    processes they start, keeps to the slots' cores. Both empty on a small host: everything shares every core."""
    from solbench.evaluate.native import pool

    mine, theirs = pool.slot_split(slots)
    if not theirs:
        return set(), set()
    pool.confine(mine)
    own = {max(theirs)}
    return own, theirs - own


def quiet_collector() -> None:
    """Keep the start-up's objects out of every later garbage collection. With torch and the service imported a
    process tracks about 225,000 objects, and a full collection of them held every request for about 0.1 s (one in
    each load test on the CPU machine: docs/PERFORMANCE.md); frozen after one last collection, what a collection
    scans is what the requests made since."""
    import gc

    gc.collect()
    gc.freeze()


def quick_handover() -> None:
    """Hand the interpreter's lock between threads every ``SWITCH_S`` instead of Python's 5 ms: a request's
    thread waits for it behind the slots' threads (storing a result, reading a slot's pipe) at each of its hops
    (the event loop, the thread that reads the database), and with the default a hop alone could wait 5 ms."""
    sys.setswitchinterval(SWITCH_S)


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@token_app.command("add")
def token_add(name: str = typer.Argument(..., help="the token's name (its jobs are its own)"),
              priority: int = typer.Option(0, help="its jobs' priority in the queue (higher first)"),
              quota: int = typer.Option(0, min=0, help="evaluations it may submit in any 24 hours (0: no limit)"),
              rate: int = typer.Option(600, min=1, help="requests a minute"),
              uploads: bool = typer.Option(False, "--uploads", help="it may upload problems (their reference code "
                                           "runs on the trusted side)"),
              db: Path = DbOption) -> None:
    """Make a token; it is printed once (the database keeps only its hash)."""
    from solbench.service.tokens import Tokens

    print(Tokens(db).add(name, priority=priority, quota=quota, rate=rate, uploads=uploads))


@token_app.command("list")
def token_list(db: Path = DbOption) -> None:
    """The tokens (names and limits, never the secrets)."""
    from rich.table import Table

    from solbench.service.tokens import Tokens

    table = Table("name", "created", "priority", "quota", "rate", "uploads", "revoked")
    for t in Tokens(db).listing():
        table.add_row(*(str(t[k]) if t[k] is not None else "-" for k in
                        ("name", "created", "priority", "quota", "rate", "uploads", "revoked")))
    out.print(table)


@token_app.command("revoke")
def token_revoke(name: str, db: Path = DbOption) -> None:
    """Refuse a token from now on (kept for the record)."""
    from solbench.service.tokens import Tokens

    Tokens(db).revoke(name)
    out.print(f"token {name} revoked")
