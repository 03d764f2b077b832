import os
from pathlib import Path

import pytest
import torch

FIXTURES = Path(__file__).parent / "fixtures"
AXPY = FIXTURES / "problems" / "axpy"
SOLUTIONS = FIXTURES / "solutions"

os.environ.setdefault("TRITON_CACHE_DIR", str(Path(os.environ.get("TMPDIR", "/tmp")) / "solbench-triton-cache"))


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def axpy():
    from solbench.problems.problem import load_problem

    return load_problem(AXPY)
