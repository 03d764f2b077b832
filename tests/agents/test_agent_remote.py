"""An attempt graded through `solbench serve` (``Setup.server``): the service evaluates on its slots, the loop
gets the public workloads' feedback and a held-out score, and the arms of one problem meet the same held-out
workloads."""

import pytest

from solbench.agents.models import ModelConfig
from solbench.agents.session import Setup, run_attempt
from solbench.agents.types import Budget
from solbench.problems.problem import load_problem
from solbench.schedule.devices import Slot
from solbench.schedule.local import LocalExecutor
from solbench.schedule.queue import JobQueue
from solbench.schedule.scheduler import Scheduler
from solbench.service.app import create_app
from solbench.service.tokens import Tokens
from tests.agents.agents_loopback import LoopbackServer, code_reply
from tests.paths import AXPY
from tests.service.live import serving

pytestmark = pytest.mark.slow

GOOD = ("import torch\n\n\ndef run(x, weight, eps, out):\n    xf = x.float()\n"
        "    out.copy_((xf * torch.rsqrt((xf * xf).mean(-1, keepdim=True) + eps) * weight.float()).to(x.dtype))\n")
WRONG = "import torch\n\n\ndef run(x, weight, eps, out):\n    out.copy_(x)\n"
AXPY_GOOD = "import torch\n\n\ndef run(x, y, alpha, out):\n    torch.add(y, x, alpha=alpha, out=out)\n"


@pytest.fixture
def service(tmp_path, monkeypatch):
    db = tmp_path / "service.db"
    monkeypatch.setenv("SOLBENCH_TOKEN", Tokens(db).add("lab", uploads=True))
    sched = Scheduler(JobQueue(db), LocalExecutor([Slot("cpu:0", "cpu")], db, tmp_path / "logs"), tick_s=0.2)
    with serving(create_app(db, sched)) as url:
        yield url, sched.queue


def _attempt(problem, url, script, replicate=0):
    with LoopbackServer(script) as srv:
        model = ModelConfig(name="loop-model", provider="openai", model="m", base_url=srv.openai_base_url,
                            max_retries=0)
        setup = Setup(device="cpu", heldout=1, secret=7, server=url,
                      budget=Budget(attempts=len(script), submissions=len(script)))
        return run_attempt(problem, "pytorch", model, setup, arm="solo", replicate=replicate)


def test_an_attempt_is_graded_by_the_service(service):
    url, queue = service
    r = _attempt(load_problem("rmsnorm"), url, [code_reply(WRONG), code_reply(GOOD)])
    first, second = r.graded
    assert not first.passed and first.verdict == "incorrect_numerical" and first.visible
    assert second.passed and second.score_sol is not None and r.best.submission == 2
    assert all(not w.uuid.startswith("heldout") for g in r.graded for w in g.visible)
    seeds = {job.spec.seed for job in queue.jobs()}
    assert len(seeds) == 1 and None not in seeds  # one problem and replicate: the same held-out workloads


def test_a_problem_the_service_lacks_travels_with_the_submission(service):
    url, queue = service
    r = _attempt(load_problem(AXPY), url, [code_reply(AXPY_GOOD)])
    assert r.graded[0].passed
    (job,) = list(queue.jobs())
    assert job.spec.problem_files and "reference.py" in job.spec.problem_files


def test_only_the_services_refusal_of_a_submission_is_a_verdict(service, monkeypatch):
    from solbench.agents.grader import RemoteGrader
    from solbench.errors import UserError
    from solbench.evaluate.runner import EvalOptions

    url, _ = service
    grader = RemoteGrader(load_problem("rmsnorm"), EvalOptions(device="cpu"), url, group="g", heldout=0)
    refused = grader.grade({"k.py": GOOD}, "fortran")  # an unknown language: the submission's fault
    assert refused.verdict == "compile_error" and refused.reasons == ["bad_submission"] and "422" in refused.message
    monkeypatch.setenv("SOLBENCH_TOKEN", "sb_not_a_token")
    locked_out = RemoteGrader(load_problem("rmsnorm"), EvalOptions(device="cpu"), url, group="g")
    with pytest.raises(UserError, match="401"):  # the token's fault, not the agent's: no verdict recorded
        locked_out.grade({"k.py": GOOD}, "pytorch")
