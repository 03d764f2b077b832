"""The service's metrics, in Prometheus' text format (``prometheus_client``, a registry per service): requests
and their latency by route, jobs by state, evaluations by outcome and per hour, the time jobs wait and run, the
memory candidates left trusted workers holding and the workers retired for it, and each slot's state."""

from __future__ import annotations

import time

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

#: request latency buckets (s): the service's own overhead is a few milliseconds
REQUEST_BUCKETS = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
JOB_BUCKETS = (0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1800, 3600)


class Metrics:
    def __init__(self):
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter("solbench_http_requests", "HTTP requests", ["route", "code"], registry=r)
        self.latency = Histogram("solbench_http_request_seconds", "time to answer a request (long polls' waits "
                                 "included)", ["route"], buckets=REQUEST_BUCKETS, registry=r)
        self.jobs = Gauge("solbench_queue_jobs", "jobs in the queue by state", ["state"], registry=r)
        self.ended = Gauge("solbench_jobs_ended", "jobs ended since the service started, by outcome", ["outcome"],
                           registry=r)
        self.per_hour = Gauge("solbench_evaluations_per_hour", "evaluations stored per hour since the service "
                              "started", registry=r)
        self.waited = Histogram("solbench_job_queued_seconds", "time from submission to a slot taking the job",
                                buckets=JOB_BUCKETS, registry=r)
        self.ran = Histogram("solbench_job_run_seconds", "time a slot took over a job", buckets=JOB_BUCKETS,
                             registry=r)
        self.phase = Counter("solbench_evaluation_phase_seconds", "evaluations' time by phase (sum)", ["phase"],
                             registry=r)
        self.held = Counter("solbench_worker_held_bytes", "device memory evaluations' candidates left their trusted "
                            "workers holding, never handed back", registry=r)
        self.retired = Counter("solbench_worker_retirements", "trusted workers retired after a job for the memory "
                               "their candidates left them holding", registry=r)
        self.busy = Gauge("solbench_slot_busy", "1 while the slot runs a job", ["slot"], registry=r)
        self.up = Gauge("solbench_slot_up", "0 while the slot rests after it could not start", ["slot"], registry=r)

    def job_ended(self, queued_s: float, run_s: float, phases: dict[str, float],
                  environment: dict | None = None) -> None:
        """A job's wait and run, its evaluation's phases, and what its environment says of the trusted worker
        (the memory its candidates left it holding, whether it retired for it: ``worker._held``)."""
        self.waited.observe(queued_s)
        self.ran.observe(run_s)
        for name, seconds in phases.items():
            if isinstance(seconds, (int, float)) and seconds >= 0:
                self.phase.labels(name).inc(seconds)
        env = environment or {}
        added = env.get("worker_held_added_bytes")
        if isinstance(added, int) and added > 0:
            self.held.inc(added)
        if env.get("worker_retired") is True:
            self.retired.inc()

    def render(self, counts: dict[str, int], scheduler) -> bytes:
        for state in ("queued", "running", "done", "failed", "cancelled"):
            self.jobs.labels(state).set(counts.get(state, 0))
        if scheduler is not None:
            for kind, n in scheduler.ended.items():
                self.ended.labels(kind).set(n)
            hours = max((time.time() - scheduler.started) / 3600.0, 1e-9)
            self.per_hour.set(scheduler.ended.get("result", 0) / hours)
            for name, slot in scheduler.health().items():
                self.busy.labels(name).set(1 if slot.get("state") == "running" else 0)
                self.up.labels(name).set(0 if slot.get("state") == "down" else 1)
        return generate_latest(self.registry)
