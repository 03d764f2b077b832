"""The service fuzzed from its own OpenAPI schema (schemathesis): whatever a client sends, the answer is never a
server error, its status is one the schema names, and its body matches the schema."""

import pytest

schemathesis = pytest.importorskip("schemathesis")

from hypothesis import HealthCheck, given, settings  # noqa: E402

from solbench.schedule.devices import Slot  # noqa: E402
from solbench.schedule.queue import JobQueue  # noqa: E402
from solbench.schedule.scheduler import Scheduler  # noqa: E402
from solbench.service.app import create_app  # noqa: E402
from solbench.service.tokens import Tokens  # noqa: E402
from tests.schedule.helpers import FakeExecutor  # noqa: E402

OPERATIONS = ["POST /v1/evaluations", "POST /v1/evaluations/batch", "GET /v1/evaluations/{job_id}",
              "DELETE /v1/evaluations/{job_id}", "GET /v1/problems", "GET /health", "GET /metrics"]


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    db = tmp_path_factory.mktemp("fuzz") / "s.db"
    secret = Tokens(db).add("fuzzer", rate=1_000_000)
    app = create_app(db, Scheduler(JobQueue(db), FakeExecutor([Slot("fake:0", "cpu")]), tick_s=0.01))
    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    return {r.ok().label: r.ok() for r in schema.get_all_operations()}, secret


def test_the_schema_names_every_route(api):
    operations, _ = api
    assert sorted(operations) == sorted(OPERATIONS)


@pytest.mark.parametrize("label", OPERATIONS)
def test_no_request_makes_the_service_fail(api, label):
    operations, secret = api
    checks = [schemathesis.checks.not_a_server_error, schemathesis.checks.status_code_conformance,
              schemathesis.checks.content_type_conformance, schemathesis.checks.response_schema_conformance]

    @given(operations[label].as_strategy())
    @settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    def fuzz(case):
        case.headers = {**(case.headers or {}), "Authorization": f"Bearer {secret}"}
        case.call_and_validate(checks=checks)

    fuzz()
