"""The mechanical check of a SKILL.md (agents/skill_check.py): code is cut, prose is kept, a skill that is mostly
code is withheld, and what was cut is recorded with the skill in the journal."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from solbench.agents import skill as skills
from solbench.agents.skill_check import REMOVED, check, rule
from solbench.agents.types import Reply, Usage
from solbench.store.journal import Journal

PROSE = """# SKILL
- axpy is bound by memory: one pass over x and y, no scratch; measured at the launch floor (6 us).
- Tiling by 128 (BLOCK=128) gave 1.8x on the large shape; 256 regressed (register spills).
- Note: slow
- If N is large: fewer, larger blocks help.
1. Result: fp32 accumulation is needed (fp16 lost precision: max error 3e-2).
> a quoted measurement: 1.2 us at 4096
| shape | time |
| --- | --- |
| 4096 | 1.2 us |
- Expected 2x from vectorised loads, measured 1.3x because the kernel(s) were launch bound.
- make the tile larger for big N; N * K / 2 bytes moved
"""

TRITON = """Here is what worked:

@triton.jit
def _axpy(x_ptr, y_ptr, out_ptr, alpha, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(y_ptr + offs, mask=m) + alpha * tl.load(x_ptr + offs, mask=m),
             mask=m)

def run(x, y, alpha, out):
    _axpy[(triton.cdiv(x.numel(), 1024),)](x, y, out, float(alpha), x.numel(), BLOCK=1024)
- memory bound
"""

MIXED = """- grid-stride loops did not help at this size (0.98x); one block per 1024 elements was best.
__global__ void axpy(const float* x, float* y, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] += a * x[i];
}
```python
out = torch.add(y, x, alpha=alpha)
```
$ nvcc -O3 -o k k.cu
pip install triton==3.0
    acc = tl.dot(a,
        b)
- `BLOCK_M` of 64 and `num_warps` 4 worked; `tl.dot(a, b, allow_tf32=False)` was needed.
- calling torch.mm(a, b) was faster than at::mm for small sizes, by 1.4x at 512 and 1.1x at 4096 squared.
- the reduction order changed the last bits only: every seed stayed within the tolerance, 40 of 40 runs.
- launch overhead dominated below 64k elements: fusing the two passes into one halved the time there.
- above 16M elements the kernel reached 91% of the DRAM bandwidth the chip's figures give, with one pass.
"""


def test_prose_is_kept_whole():
    c = check(PROSE)
    assert c.text == PROSE.strip() and c.lines_cut == 0 and c.spans_cut == 0 and not c.withheld


def test_a_solution_in_a_skill_is_withheld():
    c = check(TRITON)
    assert c.withheld and c.lines_cut == 8 and "withheld" in c.text
    assert "tl.load" not in c.text and "def " not in c.text


def test_code_commands_and_api_calls_are_cut_and_counted():
    c = check(MIXED)
    assert not c.withheld
    for gone in ("__global__", "blockIdx", "torch.add", "nvcc", "pip install", "tl.dot", "torch.mm", "at::mm",
                 "b)", "y[i]"):
        assert gone not in c.text, gone
    assert "grid-stride loops did not help" in c.text and "`BLOCK_M` of 64" in c.text
    assert "[11 lines of code removed]" in c.text and REMOVED in c.text
    assert c.reasons == {"c": 1, "continuation": 4, "fenced": 3, "shell": 2, "python": 1, "inline": 3}
    assert c.lines_cut == 11 and c.spans_cut == 3


@pytest.mark.parametrize("line,why", [
    ("x = tl.load(ptr + offs)", "python"), ("import triton", "python"), ("for i in range(n):", "python"),
    ("return out", "python"), ("@triton.autotune(configs=[])", "python"), ("torch.cuda.synchronize()", "python"),
    ("#include <cuda.h>", "c"), ("#pragma unroll", "c"), ("}", "c"), ("float acc = 0.0f;", "c"),
    ("./submit kernel.py", "shell"), ("$ ncu --set full ./a.out", "shell"), ("export TRITON_CACHE_DIR=/x", "shell"),
    ("- Note: slow", None), ("If the matrix is square: use one block per row", None), ("# Results", None),
    ("make the tile larger", None), ("make it N * K / 2 bytes", None), ("N * K", None),
    ("pip install -e .", "shell"), ("speedup (1.8x)", None), ("latency bound", None),
])
def test_one_line_rules(line, why):
    assert rule(line) == why


def test_the_skill_records_what_its_check_cut(tmp_path):
    text = "```markdown\n# SKILL\n- memory bound: one pass, 1.2x over eager\n- `x.mul_(alpha)` in place\n```"
    journal = Journal(None, "k")
    provider = SimpleNamespace(complete=lambda messages, tools: Reply(text=text, usage=Usage(input=5, output=3)))
    attempt = SimpleNamespace(journal=journal, last_feedback="passed", language="pytorch", provider=provider,
                              problem=SimpleNamespace(name="axpy"), tag="solo/pytorch/axpy/0")
    s = skills.Skill()
    s.update(attempt, {"k.py": "def run(x): ..."}, SimpleNamespace(submission=1))
    assert s.text == f"# SKILL\n- memory bound: one pass, 1.2x over eager\n- {REMOVED} in place"
    [event] = journal.events("skill")
    assert event["check"]["spans_cut"] == 1 and event["check"]["reasons"] == {"inline": 1}
    assert s.check_summary()["spans_cut"] == 1 and s.check_summary()["withheld"] == 0
