"""solbench.client against a service on loopback (fake devices): a submission retried after its answer was lost
is queued once; 429 and 503 are waited out; at most max_in_flight requests at once; the async client alike."""

import asyncio
import threading

import httpx
import pytest

from solbench.client import AsyncClient, Client
from solbench.errors import UserError
from solbench.schedule.devices import Slot
from solbench.schedule.queue import JobQueue
from solbench.schedule.scheduler import Scheduler
from solbench.service.app import create_app
from solbench.service.tokens import Tokens
from tests.schedule.helpers import FakeExecutor
from tests.service.live import serving
from tests.service.test_app import SOURCE

KW = dict(sources={"k.py": SOURCE}, language="pytorch", destination_passing_style=False)


@pytest.fixture
def service(tmp_path):
    db = tmp_path / "s.db"
    secret = Tokens(db).add("alice")
    sched = Scheduler(JobQueue(db), FakeExecutor([Slot("fake:0", "cpu")], delay_s=0.05), tick_s=0.01)
    with serving(create_app(db, sched)) as url:
        yield url, secret, sched.queue


class LoseFirstAnswer(httpx.HTTPTransport):
    """The first POST reaches the service, and its answer is lost on the way back."""

    def __init__(self):
        super().__init__()
        self.lost = 0

    def handle_request(self, request):
        response = super().handle_request(request)
        if request.method == "POST" and not self.lost:
            self.lost += 1
            response.read()
            raise httpx.ReadError("connection reset", request=request)
        return response


def test_a_retried_submission_is_queued_once_and_evaluated(service):
    url, secret, queue = service
    transport = LoseFirstAnswer()
    with Client(url, secret, backoff_s=0.01, transport=transport) as c:
        job = c.evaluate("rmsnorm", **KW)
    assert transport.lost == 1 and job["state"] == "done" and job["result"]["verdict"] == "passed"
    assert sum(queue.counts().values()) == 1


class Flaky(httpx.MockTransport):
    def __init__(self, answers):
        self.answers = list(answers)
        self.seen = 0
        super().__init__(self.answer)

    def answer(self, request):
        self.seen += 1
        status, headers = self.answers.pop(0) if self.answers else (200, {})
        return httpx.Response(status, headers=headers, json={"status": "ok", "slots": {}, "queue": {},
                                                             "detail": "busy"})


def test_busy_answers_are_waited_out_and_a_client_error_is_one_line():
    flaky = Flaky([(503, {}), (429, {"Retry-After": "0"}), (200, {})])
    assert Client("http://service", backoff_s=0.001, transport=flaky).health()["status"] == "ok"
    assert flaky.seen == 3
    with pytest.raises(UserError, match="answered 401"):
        Client("http://service", transport=Flaky([(401, {})])).health()
    with pytest.raises(UserError, match="answered 503"):
        Client("http://service", retries=1, backoff_s=0.001, transport=Flaky([(503, {})] * 5)).health()


def test_requests_in_flight_are_bounded():
    inside, most, lock, two = [0], [0], threading.Lock(), threading.Event()

    def answer(request):
        with lock:
            inside[0] += 1
            most[0] = max(most[0], inside[0])
            if inside[0] == 2:
                two.set()
        two.wait(30)  # every request stays in flight until two are: the bound is met, however slow the machine
        with lock:
            inside[0] -= 1
        return httpx.Response(200, json={"status": "ok"})

    c = Client("http://service", max_in_flight=2, transport=httpx.MockTransport(answer))
    threads = [threading.Thread(target=c.health) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert most[0] == 2


def test_the_async_client_evaluates_a_batch(service):
    url, secret, queue = service

    async def main():
        async with AsyncClient(url, secret, max_in_flight=4) as c:
            ids = await c.submit_batch([{"problem": "rmsnorm", **KW}] * 5)
            return await asyncio.gather(*(c.wait(i) for i in ids))

    jobs = asyncio.run(main())
    assert [j["state"] for j in jobs] == ["done"] * 5 and queue.counts() == {"done": 5}
