"""The service over loopback: tokens, checks of what is submitted, idempotency, ownership, limits, long polls,
cancels, health and metrics (slots on fake devices)."""

import json
import threading

import httpx
import pytest

from solbench.analysis.heldout import HELDOUT_PREFIX
from solbench.schedule.devices import Slot
from solbench.schedule.queue import JobQueue
from solbench.schedule.scheduler import Scheduler
from solbench.service.app import MAX_BODY_BYTES, create_app
from solbench.service.middleware import server_ms
from solbench.service.tokens import Tokens
from tests.schedule.helpers import FakeExecutor
from tests.service.live import serving

SOURCE = "import torch\ndef run(x, weight, eps):\n    return x\n"


def body(problem="rmsnorm", **kw):
    return {"problem": problem, "sources": {"k.py": SOURCE}, "language": "pytorch",
            "destination_passing_style": False, **kw}


@pytest.fixture
def service(tmp_path):
    """(url, tokens {name: secret}, queue, executor) of a service on two fake devices."""
    db = tmp_path / "s.db"
    tokens = Tokens(db)
    secrets = {"alice": tokens.add("alice"), "bob": tokens.add("bob", priority=3),
               "slow": tokens.add("slow", rate=2), "small": tokens.add("small", quota=2),
               "lab": tokens.add("lab", uploads=True)}
    gate = threading.Event()
    ex = FakeExecutor([Slot("fake:0", "cpu"), Slot("fake:1", "cpu")], gate=gate)
    sched = Scheduler(JobQueue(db), ex, tick_s=0.01)
    with serving(create_app(db, sched)) as url:
        yield url, secrets, sched.queue, gate


def client(url, secret=None):
    return httpx.Client(base_url=url, headers={"Authorization": f"Bearer {secret}"} if secret else {}, timeout=30)


def test_a_token_is_needed_and_a_revoked_one_refused(service, tmp_path):
    url, secrets, _, _ = service
    assert client(url).post("/v1/evaluations", json=body()).status_code == 401
    assert client(url, "sb_forged").post("/v1/evaluations", json=body()).status_code == 401
    (jid,) = client(url, secrets["alice"]).post("/v1/evaluations", json=body()).json()["ids"]
    for read in (client(url), client(url, "sb_forged")):  # reads are checked as submissions are
        assert read.get(f"/v1/evaluations/{jid}").status_code == 401
    Tokens(tmp_path / "s.db").revoke("alice")
    assert client(url, secrets["alice"]).post("/v1/evaluations", json=body()).status_code == 401
    assert client(url, secrets["alice"]).get(f"/v1/evaluations/{jid}").status_code == 401


@pytest.mark.parametrize("request_body, status, words", [
    (body("no_such_problem"), 404, "unknown problem"),
    (body("/etc"), 404, "unknown problem"),  # a path of the server's host is never read
    (body(language="fortran"), 422, "fortran"),
    (body(sources={"k.py": "x" * 2_000_000}), 413, "at most"),
    ({"problem": "rmsnorm"}, 422, "either solution or sources"),
    (body(options={"heldout": 10_000}), 422, "heldout"),
    # the trusted side's seed and the checks' strength are not the submitter's to choose
    (body(options={"seed": 1}), 422, "seed"),
    (body(options={"draws": 1}), 422, "draws"),
    (body(options={"profile_dsl": "off"}), 422, "profile_dsl"),
    (body(options={"hold": False}), 422, "hold"),
    (body(problem_files={"reference.py": "def run(x): return x"}), 403, "upload"),
])
def test_a_bad_submission_gets_a_4xx_with_why(service, request_body, status, words):
    url, secrets, queue, _ = service
    r = client(url, secrets["alice"]).post("/v1/evaluations", json=request_body)
    assert r.status_code == status and words in str(r.json()["detail"])
    assert queue.counts() == {}


def test_malformed_and_oversize_bodies_are_refused(service):
    url, secrets, _, _ = service
    c = client(url, secrets["alice"])
    assert c.post("/v1/evaluations", content=b"{not json", headers={"content-type": "application/json"}
                  ).status_code == 422
    big = c.post("/v1/evaluations", content=b" " * (MAX_BODY_BYTES + 1), headers={"content-type": "application/json"})
    assert big.status_code == 413


def test_every_answer_carries_the_servers_own_time(service):
    url, secrets, _, _ = service
    c = client(url, secrets["alice"])
    answers = [c.post("/v1/evaluations", json=body()), c.get("/v1/evaluations/999"), httpx.get(f"{url}/health"),
               c.post("/v1/evaluations", content=b" " * (MAX_BODY_BYTES + 1))]
    assert [a.status_code for a in answers] == [202, 404, 200, 413]
    took = [server_ms(a.headers) for a in answers]
    assert all(t is not None and t >= 0 for t in took), took
    text = httpx.get(f"{url}/metrics").text
    assert 'solbench_http_requests_total{code="404",route="/v1/evaluations/{job_id}"} 1.0' in text
    assert 'solbench_http_requests_total{code="413",route="unmatched"} 1.0' in text


def test_a_retried_submission_is_queued_once(service):
    url, secrets, queue, _ = service
    c = client(url, secrets["alice"])
    first = c.post("/v1/evaluations", json=body(), headers={"Idempotency-Key": "k1"}).json()["ids"]
    again = c.post("/v1/evaluations", json=body(), headers={"Idempotency-Key": "k1"}).json()["ids"]
    other = c.post("/v1/evaluations", json=body(), headers={"Idempotency-Key": "k2"}).json()["ids"]
    assert first == again and other != first and sum(queue.counts().values()) == 2


def test_a_token_sees_only_its_own_jobs(service):
    url, secrets, _, _ = service
    (jid,) = client(url, secrets["alice"]).post("/v1/evaluations", json=body()).json()["ids"]
    assert client(url, secrets["bob"]).get(f"/v1/evaluations/{jid}").status_code == 404
    assert client(url, secrets["bob"]).delete(f"/v1/evaluations/{jid}").status_code == 404
    assert client(url, secrets["alice"]).get(f"/v1/evaluations/{jid}").json()["id"] == jid


def test_rate_limit_and_quota_answer_429(service):
    url, secrets, _, _ = service
    slow = client(url, secrets["slow"])
    codes = [slow.get("/v1/problems").status_code for _ in range(3)]
    assert codes[:2] == [200, 200] and codes[2] == 429
    assert slow.get("/v1/evaluations/1").status_code == 429  # reads count against the rate too
    small = client(url, secrets["small"])
    assert small.post("/v1/evaluations/batch", json={"evaluations": [body(), body()]}).status_code == 202
    r = small.post("/v1/evaluations", json=body())
    assert r.status_code == 429 and "quota" in r.json()["detail"]


def test_a_long_poll_returns_when_the_job_ends(service):
    url, secrets, _, gate = service
    c = client(url, secrets["alice"])
    (jid,) = c.post("/v1/evaluations", json=body()).json()["ids"]
    assert c.get(f"/v1/evaluations/{jid}", params={"wait": 0.2}).json()["state"] in ("queued", "running")
    threading.Timer(0.3, gate.set).start()
    job = c.get(f"/v1/evaluations/{jid}", params={"wait": 30}).json()
    assert job["state"] == "done" and job["result"]["verdict"] == "passed"


def test_cancel_and_priority(service):
    url, secrets, queue, _ = service
    alice, bob = client(url, secrets["alice"]), client(url, secrets["bob"])
    ids = alice.post("/v1/evaluations/batch", json={"evaluations": [body()] * 4}).json()["ids"]
    (urgent,) = bob.post("/v1/evaluations", json=body()).json()["ids"]
    assert queue.get(urgent).priority == 3 and queue.get(ids[0]).priority == 0
    assert alice.delete(f"/v1/evaluations/{ids[-1]}").json()["state"] == "cancelled"


def test_health_and_metrics(service):
    url, secrets, _, _ = service
    client(url, secrets["alice"]).post("/v1/evaluations", json=body())
    health = httpx.get(f"{url}/health").json()
    assert health["status"] == "ok" and set(health["slots"]) == {"fake:0", "fake:1"}
    text = httpx.get(f"{url}/metrics").text
    assert 'solbench_queue_jobs{state="queued"}' in text or 'solbench_queue_jobs{state="running"}' in text
    assert 'solbench_http_requests_total{code="202",route="/v1/evaluations"} 1.0' in text


def test_seed_groups_are_per_token_and_secret(service):
    url, secrets, queue, _ = service
    a, b = client(url, secrets["alice"]), client(url, secrets["bob"])
    ids = [a.post("/v1/evaluations", json=body(seed_group="g")).json()["ids"][0] for _ in range(2)]
    other = b.post("/v1/evaluations", json=body(seed_group="g")).json()["ids"][0]
    fresh = a.post("/v1/evaluations", json=body()).json()["ids"][0]
    seeds = [queue.get(i).spec.seed for i in ids + [other, fresh]]
    assert seeds[0] == seeds[1] and seeds[2] != seeds[0] and seeds[3] is None
    assert str(seeds[0]) not in a.get(f"/v1/evaluations/{ids[0]}").text


def test_a_response_holds_no_seed_nor_held_out_shape(tmp_path):
    """A real evaluation with held-out workloads and a failing visible comparison: the answer names neither the
    failing draw's seed nor any held-out workload."""
    from solbench.schedule.local import LocalExecutor

    db = tmp_path / "s.db"
    secret = Tokens(db).add("alice")
    sched = Scheduler(JobQueue(db), LocalExecutor([Slot("cpu:0", "cpu")], db, tmp_path / "logs"), tick_s=0.2)
    wrong = "import torch\ndef run(x, weight, eps):\n    print('shape', tuple(x.shape))\n    return x * 2\n"
    with serving(create_app(db, sched)) as url:
        c = client(url, secret)
        (jid,) = c.post("/v1/evaluations", json=body(sources={"k.py": wrong}, options={"heldout": 2})).json()["ids"]
        text = c.get(f"/v1/evaluations/{jid}", params={"wait": 60}).text
    job = json.loads(text)
    assert job["state"] == "done" and job["result"]["heldout"]["count"] == 2
    failure = job["result"]["workloads"][0]["failure"]
    assert failure and "worst" in failure and "seed" not in failure
    assert HELDOUT_PREFIX not in text and "shape" not in (job["result"]["log_tail"] or "")
    ev = sched.queue.get(jid)
    from solbench.store.db import Store

    stored, _ = Store(db).evaluation(ev.evaluation_id)
    assert str(stored.seed) not in text
    hidden = [w for w in stored.workloads if w.uuid.startswith(HELDOUT_PREFIX)]
    assert len(hidden) == 2 and not any(w.uuid in text for w in hidden)
    assert '"axes"' not in text  # no workload's shape is in an answer, a held-out one's least of all


def test_a_retry_is_answered_even_past_the_quota_and_open_is_no_tokens_name(service, tmp_path):
    url, secrets, queue, _ = service
    small = client(url, secrets["small"])
    first = small.post("/v1/evaluations/batch", json={"evaluations": [body(), body()]},
                       headers={"Idempotency-Key": "k"}).json()["ids"]
    again = small.post("/v1/evaluations/batch", json={"evaluations": [body(), body()]},
                       headers={"Idempotency-Key": "k"})
    assert again.status_code == 202 and again.json()["ids"] == first  # the quota (2) is used up, the retry is not new
    from solbench.errors import UserError

    with pytest.raises(UserError):
        Tokens(tmp_path / "s.db").add("(open)")


def test_a_job_s_workloads_are_each_evaluated_once(service):
    url, secrets, queue, _ = service
    (jid,) = client(url, secrets["alice"]).post(
        "/v1/evaluations", json=body(options={"workloads": ["rmsnorm-cpu-t4-h256"] * 50})).json()["ids"]
    assert queue.get(jid).spec.options.workloads == ["rmsnorm-cpu-t4-h256"]


def test_a_solution_too_deep_to_store_is_refused_not_a_server_error(service):
    url, secrets, queue, _ = service
    deep: dict = {}
    for _ in range(700):
        deep = {"x": deep}
    solution = {"name": "s", "definition": "rmsnorm", "author": "a", "extra": deep,
                "spec": {"language": "pytorch", "entry_point": "k.py::run", "destination_passing_style": False},
                "sources": [{"path": "k.py", "content": SOURCE}]}
    r = client(url, secrets["alice"]).post("/v1/evaluations", json={"problem": "rmsnorm", "solution": solution})
    assert r.status_code == 422 and "not storable" in r.json()["detail"] and queue.counts() == {}


def test_an_ended_jobs_answer_is_kept_until_the_job_changes(tmp_path):
    """A poller's repeated reads of an ended job are answered from what the first read made; a job run again
    (another attempt, another error) is answered anew, and a job still queued is never kept."""
    from solbench.schedule.jobs import Job, JobSpec
    from solbench.service.app import ENDED_VIEWS, Service

    svc = Service(tmp_path / "s.db")
    spec = JobSpec(problem="rmsnorm", solution={}, options={})
    failed = Job(id=7, state="failed", created=1.0, finished=2.0, attempts=1, spec=spec, error="slot lost\ntrace")
    first = svc.view(failed)
    assert first.error == "slot lost" and svc.view(failed.model_copy()) is first
    again = failed.model_copy(update={"attempts": 2, "finished": 3.0, "error": "hung"})
    assert svc.view(again).error == "hung" and svc.view(failed) is first
    queued = Job(id=8, state="queued", created=1.0, spec=spec)
    assert svc.view(queued) is not svc.view(queued)
    for i in range(ENDED_VIEWS + 1):  # bounded: the oldest answers go first
        svc.view(failed.model_copy(update={"id": 100 + i}))
    assert len(svc.ended) == ENDED_VIEWS and svc.view(failed) is not first


def test_metrics_count_the_memory_candidates_left_and_the_workers_retired_for_it():
    """The scheduler's hook reads each evaluation's environment: what its candidates left the trusted worker
    holding (``worker._held``) and whether the worker retired for it, as counters an operator can alert on."""
    import json

    from solbench.schedule.outcome import Outcome
    from solbench.service.metrics import Metrics
    from solbench.service.views import on_end

    metrics = Metrics()
    hook = on_end(metrics)
    job = type("Job", (), {"started": 10.0, "created": 5.0})()
    for env in ({"worker_held_added_bytes": 64 << 20, "worker_held_bytes": 64 << 20, "worker_retired": False},
                {"worker_held_added_bytes": 1 << 30, "worker_held_bytes": 5 << 30, "worker_retired": True}, {}):
        hook(None, job, Outcome("result", evaluation=json.dumps({"phases": {"timing": 1.5}, "environment": env})))
    hook(None, job, Outcome("failed", message="the slot's process ended"))
    text = metrics.render({}, None).decode()
    values = dict(line.rsplit(" ", 1) for line in text.splitlines() if line and not line.startswith("#"))
    assert float(values["solbench_worker_held_bytes_total"]) == (64 << 20) + (1 << 30)
    assert float(values["solbench_worker_retirements_total"]) == 1.0
    assert 'solbench_evaluation_phase_seconds_total{phase="timing"} 4.5' in text
