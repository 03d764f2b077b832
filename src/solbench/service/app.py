"""The evaluation service's HTTP API (FastAPI): submit evaluations, poll or long-poll for their results, cancel
them; health and metrics. ``create_app`` builds it on a database and the scheduler that serves it.

Every route but ``/health`` and ``/metrics`` needs a token (``Authorization: Bearer sb_...``) unless the service
runs open (loopback only). A token sees only its own jobs. A submission is checked before it is queued: a
bundled problem's name (never a path of this host) or uploaded problem files, a solution in a known language,
sizes within bounds; a mistake is a 4xx with one clear message. A retried submission with the same
``Idempotency-Key`` gets the jobs of the first.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import threading
import time
from collections import OrderedDict
from functools import lru_cache
from pathlib import Path
from typing import Optional

import anyio
from fastapi import Depends, FastAPI, Header, HTTPException
from fastapi import Path as PathParam
from fastapi import Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from solbench import version
from solbench.errors import UserError
from solbench.schedule.jobs import ENDED, Job, JobSpec
from solbench.schedule.queue import JobQueue, QuotaExceeded
from solbench.service import views
from solbench.service.metrics import Metrics
from solbench.service.middleware import Bounded
from solbench.service.schemas import (BatchRequest, EvaluationRequest, Health, JobView, SlotView, Submitted,
                                      refusals)
from solbench.service.tokens import Token, Tokens

#: the largest request body accepted (a batch of solutions)
MAX_BODY_BYTES = 8 << 20
#: the longest a long poll waits
MAX_WAIT_S = 60.0
JobId = PathParam(..., ge=1, le=2 ** 63 - 1, description="the evaluation's id, as submitting it answered")
#: ended jobs whose answers are kept (``Service.view``): a poller's repeated reads cost no decoding
ENDED_VIEWS = 4096
#: an open service's caller: its operator, on loopback (a name no real token can have: ``tokens._NAME``)
OPEN = Token("(open)", uploads=True)


class Service:
    """What the routes share: the queue, the tokens, the results, the scheduler (None: jobs wait for one)."""

    def __init__(self, db: Path, scheduler=None, open_access: bool = False, device: str = "cpu"):
        from solbench.store.db import Store

        self.queue: JobQueue = scheduler.queue if scheduler is not None else JobQueue(db)
        self.scheduler = scheduler
        self.tokens = Tokens(db)
        self.store = Store(db, shared=True)
        self.store_lock = threading.Lock()
        self.open = open_access
        self.device = device
        self.secret = self.tokens.secret()
        self.metrics = Metrics()
        self.ended: OrderedDict[tuple, JobView] = OrderedDict()  # an ended job's answer, by every field it shows
        self.ended_lock = threading.Lock()
        from solbench.hardware.registry import detect

        self.hardware = detect(device).id
        _peak(views.bundled_problem("rmsnorm"), device)  # its imports (torch) now, not in a first request

    def caller(self, authorization: Optional[str] = Header(None)) -> Token:
        secret = authorization[7:].strip() if authorization and authorization.lower().startswith("bearer ") else None
        token = self.tokens.check(secret)
        if token is None:
            if self.open and secret is None:
                return OPEN
            raise HTTPException(401, "a valid API token is needed: Authorization: Bearer sb_...",
                                headers={"WWW-Authenticate": "Bearer"})
        wait_s = self.tokens.allow(token)
        if wait_s > 0:
            raise HTTPException(429, f"rate limit of {token.rate} requests a minute reached",
                                headers={"Retry-After": str(max(1, round(wait_s)))})
        return token

    def seed(self, token: Token, group: str | None) -> int | None:
        if group is None:
            return None
        mac = hmac.new(self.secret, f"{token.name}\0{group}".encode(), hashlib.sha256).digest()
        return int.from_bytes(mac[:8], "big") >> 1

    def prepare(self, req: EvaluationRequest, token: Token) -> tuple[JobSpec, int]:
        """The job of a request, and its estimated device memory (UserError: what is wrong with it)."""
        if req.problem_files is not None and not token.uploads:
            raise HTTPException(403, "this token may not upload problems (their reference code runs on the trusted "
                                     "side): ask for a token made with --uploads")
        problem = views.request_problem(req)
        solution = views.request_solution(req, problem, token.name)
        spec = JobSpec(problem=problem.name if req.problem_files is None else str(problem.directory),
                       problem_files=req.problem_files, solution=solution.model_dump(),
                       options=req.options.job_options(), seed=self.seed(token, req.seed_group))
        try:  # what the queue stores and the slot reads back: a solution too deep to round-trip is refused here
            JobSpec.model_validate_json(spec.model_dump_json())
        except (ValueError, RecursionError) as exc:
            raise UserError(f"solution: not storable as a job ({type(exc).__name__})") from None
        return spec, _peak(problem, self.device)

    def submit(self, reqs: list[EvaluationRequest], token: Token, key: str | None) -> list[int]:
        known = self.queue.submitted(token.name, key) if key else []
        if known:  # a retry of a submission already queued: its jobs, whatever the quota says now
            return known
        prepared = []
        for i, req in enumerate(reqs):
            try:
                prepared.append(self.prepare(req, token))
            except UserError as exc:
                where = f"evaluation {i}: " if len(reqs) > 1 else ""
                raise HTTPException(_status(exc), where + str(exc)) from None
        try:  # the quota counted in the submission's own transaction: concurrent batches cannot pass it together
            return self.queue.submit([p[0] for p in prepared], priority=token.priority, token=token.name,
                                     peaks=[p[1] for p in prepared], key=key, quota=token.quota)
        except QuotaExceeded as exc:
            raise HTTPException(429, str(exc)) from None

    def owned(self, job_id: int, token: Token) -> Job:
        job = self.queue.get(job_id)
        if job is None or job.token != token.name:
            raise HTTPException(404, f"no evaluation {job_id} of this token")
        return job

    def read(self, authorization: Optional[str], job_id: int) -> tuple[Job, JobView | None]:
        """A GET's work in one thread (each hop to a thread is a wait for the interpreter's lock under load): the
        caller's token, its job, and the job's answer where the job has ended."""
        job = self.owned(job_id, self.caller(authorization))
        return job, (self.view(job) if job.state in ENDED else None)

    def view(self, job: Job) -> JobView:
        """The job's answer; an ended job's is kept, by every field it shows (a stored evaluation never changes,
        and a job run again shows other attempts)."""
        if job.state not in ENDED:
            return self.fresh_view(job)
        key = (job.id, job.state, job.started, job.finished, job.attempts, job.evaluation_id, job.error)
        with self.ended_lock:
            kept = self.ended.get(key)
        if kept is None:
            kept = self.fresh_view(job)
            with self.ended_lock:
                self.ended[key] = kept
                while len(self.ended) > ENDED_VIEWS:
                    self.ended.popitem(last=False)
        return kept

    def fresh_view(self, job: Job) -> JobView:
        result = None
        if job.state == "done" and job.evaluation_id is not None:
            with self.store_lock:
                ev, _ = self.store.evaluation(job.evaluation_id)
            result = views.result_view(ev)
        return JobView(id=job.id, state=job.state, created=job.created, started=job.started, finished=job.finished,
                       attempts=job.attempts, error=views.public_error(job.error) if job.state == "failed" else None,
                       result=result)


@lru_cache(maxsize=512)
def _peak_of(directory: str, device: str) -> int:
    from solbench.evaluate import admission

    return admission.peak_bytes(views.load(directory), device)


def _peak(problem, device: str) -> int:
    try:
        return _peak_of(str(problem.directory), device)
    except Exception:  # an estimate: a problem it fails on is admitted anywhere and judged by its footprint
        return 0


def _status(exc: UserError) -> int:
    text = str(exc)
    return 404 if text.startswith("unknown problem") else 413 if "at most" in text else 422


def create_app(db: Path, scheduler=None, open_access: bool = False, device: str = "cpu") -> FastAPI:
    svc = Service(db, scheduler, open_access, device)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        if scheduler is not None and not scheduler.serving:
            scheduler.start()
        yield
        if scheduler is not None:
            scheduler.stop()

    app = FastAPI(title="solbench", description="Evaluations of GPU kernels against the hardware's speed of light, "
                  "judged by a trusted evaluator.", version=version(), lifespan=lifespan)
    app.state.service = svc

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        """A request that does not validate: one line naming the first field at fault."""
        first = exc.errors()[0] if exc.errors() else {"loc": (), "msg": "not valid"}
        where = ".".join(str(x) for x in first.get("loc", ()) if x != "body")
        return JSONResponse({"detail": f"{where + ': ' if where else ''}{first.get('msg', 'not valid')}"},
                            status_code=422)
    if scheduler is not None:
        scheduler.on_end = views.on_end(svc.metrics)

    def observe(route: str, status: int, seconds: float) -> None:
        svc.metrics.requests.labels(route, str(status)).inc()
        svc.metrics.latency.labels(route).observe(seconds)

    app.add_middleware(Bounded, max_bytes=MAX_BODY_BYTES, observe=observe)

    submitting = refusals(401, 403, 404, 411, 413, 422, 429)
    reading = refusals(401, 404, 422, 429)

    @app.post("/v1/evaluations", response_model=Submitted, status_code=202, summary="submit one evaluation",
              responses=submitting)
    def submit(req: EvaluationRequest, token: Token = Depends(svc.caller),
               idempotency_key: Optional[str] = Header(None, max_length=128)) -> Submitted:
        return Submitted(ids=svc.submit([req], token, idempotency_key))

    @app.post("/v1/evaluations/batch", response_model=Submitted, status_code=202, summary="submit several",
              responses=submitting)
    def submit_batch(req: BatchRequest, token: Token = Depends(svc.caller),
                     idempotency_key: Optional[str] = Header(None, max_length=128)) -> Submitted:
        return Submitted(ids=svc.submit(req.evaluations, token, idempotency_key))

    @app.get("/v1/evaluations/{job_id}", response_model=JobView, summary="an evaluation's state and result",
             responses=reading)
    async def result(job_id: int = JobId, wait: float = Query(0.0, ge=0.0, le=MAX_WAIT_S,
                                                      description="seconds to wait for it to end (a long poll)"),
                     authorization: Optional[str] = Header(None)) -> JobView:
        job, ended = await anyio.to_thread.run_sync(svc.read, authorization, job_id)  # the database off the loop
        if ended is not None:
            return ended
        deadline = time.monotonic() + wait
        pause = 0.02
        while job.state not in ENDED and time.monotonic() < deadline:
            await asyncio.sleep(min(pause, max(0.0, deadline - time.monotonic())))
            pause = min(pause * 1.5, 0.25)
            job = await anyio.to_thread.run_sync(svc.queue.get, job_id)
        return await anyio.to_thread.run_sync(svc.view, job)

    @app.delete("/v1/evaluations/{job_id}", response_model=JobView, summary="cancel an evaluation",
                responses=reading)
    def cancel(job_id: int = JobId, token: Token = Depends(svc.caller)) -> JobView:
        svc.owned(job_id, token)
        return svc.view(svc.queue.cancel(job_id))

    @app.get("/v1/problems", summary="the bundled problems", responses=refusals(401, 429))
    def problems(token: Token = Depends(svc.caller)) -> list[dict]:
        return views.problem_list()

    @app.get("/health", response_model=Health, summary="each slot's state and the queue's")
    def health() -> Health:
        slots = {} if scheduler is None else {
            name: SlotView(device=s.get("device", "?"), state=s.get("state", "idle"), job=s.get("job"),
                           restarts=s.get("restarts", 0)) for name, s in scheduler.health().items()}
        down = not slots or any(s.state == "down" for s in slots.values())
        return Health(status="degraded" if down else "ok", hardware=svc.hardware, slots=slots,
                      queue=svc.queue.counts())

    @app.get("/metrics", summary="Prometheus metrics", response_class=Response)
    def metrics() -> Response:
        return Response(svc.metrics.render(svc.queue.counts(), scheduler), media_type="text/plain; version=0.0.4")

    return app

