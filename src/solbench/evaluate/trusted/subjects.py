"""The candidate subject the trusted worker judges: a solution called in a sandboxed process of its own (a trusted
baseline called in the worker's own process is ``local.LocalSubject``).

Both answer ``call`` (one call on given inputs) and ``time`` (a timing, in rounds the trusted side plans: see
``stopping``). For a candidate, every input it is lent is a copy of one the trusted side keeps; every output is
read out of memory the trusted side owns and pre-filled; every reply is checked against the trusted side's
record of the exchange (``protocol``); and the timed calls that are re-checked are picked here, from a secret,
after the round's outputs are written (``ring``).
"""

from __future__ import annotations

import sys
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator

from solbench.evaluate.boundary import protocol
from solbench.evaluate.trusted.checked import CheckedCalls
from solbench.evaluate.trusted.outcomes import Rejected, Timed


class RemoteSubject(CheckedCalls):
    """A candidate solution, run in its own sandboxed process; it is lent inputs through an arena."""

    untrusted = True

    def __init__(self, ctx, subject: dict[str, Any]):
        from solbench.evaluate.languages import get_language

        self.ctx = ctx
        self.subject = subject
        language = get_language(subject["language"])
        self.language = language
        self.is_dsl = subject["language"] == "triton"  # the ghost replay and the interpreter's store count
        names = set(subject.get("kernel_names") or ())
        #: whether a profiled call must show the solution's own kernels: every kernel language (a solution that
        #: defines none has a share of zero), not PyTorch
        self.proves = language.name != "pytorch"
        self.owns = lambda kernel: language.owns(kernel, names)
        self.interpreted = ctx.dev.type == "cpu" and language.interpreted_on_cpu
        self.proc = None
        self.ready_s: float | None = None
        self.restarts = 0
        self.isolation: str | None = None
        self.filtered = False  # the candidate's system-call filter, as read from outside its process
        self._null: RemoteSubject | None = None  # the null candidate the audit calibrates against (CPU)
        #: a null candidate started ahead (``launch_null_partner``), its load's answer not yet read
        self._launched: tuple[RemoteSubject, dict[str, Any], float] | None = None
        self.arena = None
        self.arena_id = 0
        self._calls_arena: int | None = None  # the bytes of the arena when checked calls lent it (``_lend_for_calls``)
        self.harness: str | None = None  # the digest of the candidate's harness snapshot taken before its import
        self.import_codes: list[str] = []
        self.log_path = ctx.workdir / ("null-candidate.log" if subject.get("null") else "candidate.log")
        self.timed_out = False  # a request of this subject ran out of its workload's limit
        #: the current workload's time limit (``limits``) and what the candidate has used of it: the time the
        #: trusted side waited for its process (calls, hand-overs, audited brackets), not its own work between
        self.budget_s: float | None = None
        self.used_s = 0.0

    # the process --------------------------------------------------------------------------------------
    def start(self, with_null: bool = False) -> str | None:
        """Start the candidate's process and load the solution; returns a compile error, or None. ``with_null``:
        start the audit's null candidate beside it (``launch_null_partner``)."""
        launched = self._launch()
        if with_null:
            self.launch_null_partner()
        error = self._loaded(*launched)
        if error and self._launched is not None:
            self._launched[0].close()
            self._launched = None
        return error

    def _launch(self) -> tuple[dict[str, Any], float]:
        """The first half of ``start``: the process started and told to load (its answer read by ``_loaded``)."""
        from solbench.evaluate.isolation.sandbox import CandidateProcess, SandboxSpec

        job = self.ctx.job
        sb = job["sandbox"]
        spec = SandboxSpec(staged=self.subject["staged"], workdir=sb["private"], env=sb["env"],
                           device=job["device"], hidden=list(sb.get("hidden") or []),
                           readable=list(sb.get("readable") or []), writable=list(sb.get("writable") or []),
                           mode=sb.get("mode", "auto"),
                           max_file_bytes=int(sb.get("max_file_bytes", 4 << 30)),
                           max_address_space_bytes=int(sb.get("max_address_space_bytes", 64 << 30)))
        self.proc = CandidateProcess(spec, self.log_path, zygote=self.ctx.zygote)
        t0 = time.perf_counter()
        self.proc.start()
        load = {"op": "load", "device": job["device"], "language": self.subject["language"],
                "staged": self.subject["staged"], "entry_file": self.subject["entry_file"],
                "function": self.subject["function"], "dps": bool(self.subject.get("dps")),
                "tf32": bool(self.ctx.definition.allow_tf32), "threads": int(job.get("cpu_threads") or 0),
                "null": bool(self.subject.get("null")), "nonce": protocol.nonce()}
        self.proc.send(load)
        return load, t0

    def _loaded(self, load: dict[str, Any], t0: float) -> str | None:
        """The second half of ``start``: the process's answer to ``load`` (a compile error, or None)."""
        from solbench.evaluate.isolation.sandbox import CandidateGone

        try:
            raw, alone = self.proc.receive(float(self.ctx.job.get("startup_timeout_s", 180)))
            reply = protocol.accept(raw, "ready", load["nonce"], alone)
        except CandidateGone as gone:
            self.stop()
            return f"the solution did not load ({gone.why}): {gone.detail}"[:2000]
        except protocol.Forged as forged:
            self.stop()
            return f"the candidate's process did not report ready: {forged}"[:2000]
        if reply.type == "fatal":
            self.stop()
            return str(reply.message)[:2000]
        if self.ready_s is None:
            self.ready_s = time.perf_counter() - t0
        self.harness = reply.harness
        self.import_codes = [c for c in reply.codes if isinstance(c, str)][:10]
        self.isolation = self.proc.isolation
        self._check_filter(reply.seccomp)
        return None

    def _check_filter(self, claimed: str | None) -> None:
        """Whether the candidate's system-call filter is in place, read from outside its process: a candidate
        that runs without one where this machine can load it is a reward hack (``seccomp_refused``)."""
        from solbench.evaluate.isolation import outside, seccomp

        pid = outside.candidate_pid(self.proc.proc.pid)
        filters = outside.seccomp_filters(pid) if pid is not None else None
        self.filtered = bool(filters)
        if filters or filters is None:
            return
        if seccomp.available(seccomp.sealed(self.language.compiled, self.ctx.dev.type)):
            self.import_codes.append("seccomp_refused")
            why = claimed or "it reported the filter installed"
            print(f"solbench: the candidate runs without its system-call filter ({why})", file=sys.stderr)

    def launch_null_partner(self) -> None:
        """Start the next ``new_null_partner`` now, beside this candidate's own start: its answer is read when the
        audit first needs it, so that its start (a process, a CUDA context) costs no wait of its own."""
        if self._launched is None:
            null = RemoteSubject(self.ctx, dict(self.subject, null=True, language="pytorch"))
            self._launched = (null, *null._launch())

    def new_null_partner(self) -> "RemoteSubject":
        """A started null candidate in this candidate's sandbox, with its calling convention: it loads no
        solution (``audit``); the one ``launch_null_partner`` started, where there is one."""
        self.launch_null_partner()  # nothing to do where one was started beside this candidate
        (null, load, t0), self._launched = self._launched, None
        error = null._loaded(load, t0)
        if error:
            from solbench.evaluate.timing.audit import Unaudited

            raise Unaudited(f"the null candidate did not start: {error}")
        return null

    def drop_null_partner(self) -> None:
        """End the kept null candidate: the next ``null_partner`` starts a fresh one."""
        if self._null is not None:
            self._null.close()
            self._null = None

    def null_partner(self) -> "RemoteSubject":
        """This subject's null candidate, started once and kept until the subject closes."""
        if self._null is None or self._null.proc is None:
            self._null = self.new_null_partner()
        return self._null

    def stop(self, grace_s: float = 2.0) -> None:
        """End the candidate's process (``CandidateProcess.stop``): the next call starts a fresh one."""
        if self.proc is not None:
            self.proc.stop(grace_s)
            self.proc = None
        self._drop_arena()

    def close(self) -> None:
        self.stop()
        if self._null is not None:
            self._null.close()
            self._null = None
        if self._launched is not None:
            self._launched[0].close()
            self._launched = None

    def begin(self, uuid: str, reference: Callable) -> None:
        pass

    def limit(self, seconds: float) -> None:
        """The current workload's time limit starts now: every wait for the candidate gets what is left of it. The
        trusted side's own work between waits (input draws, the reference, comparisons, re-checks) is not the
        candidate's time: a workload whose checks take long on a large output does not time its solution out."""
        self.budget_s, self.used_s = seconds, 0.0

    def _left_s(self) -> float:
        if self.budget_s is None:
            return float(self.ctx.job.get("workload_timeout_s") or 120)
        return max(0.5, self.budget_s - self.used_s)

    @contextmanager
    def waiting(self) -> Iterator[float]:
        """A wait for the candidate's process, given what is left of the limit; its time is charged to it."""
        t0 = time.monotonic()
        try:
            yield self._left_s()
        finally:
            self.used_s += time.monotonic() - t0

    def gone(self, gone) -> dict[str, Any]:
        """The verdict update for a process that did not answer (``CandidateGone``); it is stopped, and the next
        workload gets a fresh one. A process that hangs is killed without the grace a well-behaved exit gets."""
        self.stop(grace_s=0)
        self.restarts += 1
        if gone.why == "timeout":
            self.timed_out = True
            return {"verdict": "timeout", "reasons": ["timeout"],
                    "message": f"{gone.detail} (the workload's time limit)"}
        return {"verdict": "runtime_error", "reasons": ["crash"], "message": gone.detail}

    def end(self) -> None:
        self._drop_arena()
        self.budget_s = None

    def _drop_arena(self) -> None:
        if self.arena is not None:
            self.arena.close()
            self.arena = None
            if self.ctx.dev.type == "cuda":
                self.ctx.torch.cuda.empty_cache()  # a ring's memory goes back before the next workload's

    def _settle(self) -> None:
        """The arena's copies are queued on this process's stream: they must land before the candidate reads."""
        if self.ctx.dev.type == "cuda":
            self.ctx.torch.cuda.synchronize()

    def _lend(self, nbytes: int):
        from solbench.evaluate.boundary.arena import Arena

        self._drop_arena()
        self._calls_arena = None
        self.arena_id += 1
        self.arena = Arena(nbytes, self.ctx.dev, self.ctx.job["sandbox"]["private"])
        return self.arena

    def _exchange(self, msg: dict[str, Any], expected: str):
        """(the checked reply, None) or (None, a verdict update) when the process did not answer or the reply is
        not one the exchange allows."""
        from solbench.evaluate.isolation.sandbox import CandidateGone

        if self.proc is None:
            error = self.start()
            if error:
                return None, {"verdict": "runtime_error", "reasons": ["restart_failed"], "message": error}
        msg = dict(msg, arena_id=self.arena_id, arena=self.arena.handle, nonce=protocol.nonce())
        try:
            with self.waiting() as left_s:
                raw, alone = self.proc.request(msg, left_s)
        except CandidateGone as gone:
            return None, self.gone(gone)
        try:
            reply = protocol.accept(raw, expected, msg["nonce"], alone)
        except protocol.Forged as forged:
            self.stop(grace_s=0)  # the channel is out of step: the next workload gets a fresh process
            return None, {"verdict": "reward_hack", "reasons": ["result_forgery"], "message": str(forged)}
        codes = list(self.import_codes) + [c for c in reply.codes][:10]
        if not reply.lost and reply.harness != self.harness and "harness_tamper" not in codes:
            codes.append("harness_tamper")  # the digest the trusted side holds from before the solution loaded
        reply.codes = sorted(set(codes))
        return reply, None

    def _failure(self, reply) -> dict[str, Any]:
        """The failure a reply reports, as a verdict update: only runtime_error is accepted from a candidate."""
        if reply.lost:
            self.stop()
        failed = reply.failed
        if failed.get("verdict") != "runtime_error":
            return {"verdict": "reward_hack", "reasons": ["result_forgery"],
                    "message": f"the candidate's process reported the verdict {str(failed.get('verdict'))[:40]!r}; "
                               "only the trusted side decides verdicts other than runtime_error"}
        return {"verdict": "runtime_error", "reasons": [str(r) for r in failed.get("reasons") or []][:5],
                "message": str(failed.get("message") or "")[:3000]}

    def time(self, uuid: str, axes: dict[str, int], cfg, draw: Callable[[int], list[Any]],
             recheck: Callable[[list[Any], list[Any]], str | None]) -> Timed:
        """Time the candidate in rounds over a ring of fresh inputs (see ``ring`` and ``cross_check``)."""
        from solbench.evaluate.timing.cross_check import time_remote

        try:
            return time_remote(self, uuid, axes, cfg, draw, recheck)
        except Rejected as r:
            return Timed(codes=r.codes, message=r.message, failure=r.failure)

