"""scripts/prebuild_corpus.py: which of the corpus's solutions the GPU set's `prebuild` stage builds ahead."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.paths import ROOT, TESTS


def test_it_builds_the_compiled_solutions_the_gpu_set_evaluates_and_no_statically_rejected_source():
    """Every honest CUDA C++ fixture the GPU set evaluates is built ahead; an exploit the static scan rejects
    (its source never compiled by an evaluation) is not, nor is a solution of a language that builds nothing."""
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "prebuild_corpus.py"), "--list"],
                         capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stderr
    listed = out.stdout.split()
    honest = [json.loads(p.read_text()) for p in sorted((TESTS / "honest").glob("MANIFEST*.json"))]
    compiled = {f"honest/{e['file']}" for group in honest for e in group
                if e["file"].endswith(".json") and e["runs_on"] == "gpu"}
    assert compiled and compiled <= set(listed), compiled - set(listed)
    assert "exploits/i21_02_asm_label_pthread.json" not in listed  # rejected by the static scan
    assert "exploits/i21_02_token_paste.json" in listed  # let through to its build, caught after it
    assert not [name for name in listed if name.endswith(".py")] and len(listed) == len(set(listed))
