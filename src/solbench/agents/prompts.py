"""Prompts from editable templates: the system prompt, the task statement, the feedback after a graded submission.

Templates are Markdown files with ``string.Template`` placeholders (``$name``), looked up in the directories the
caller gives, then in the packaged ``agents/templates``. For the chip the most specific name found anywhere wins:
``chips/<hardware id>.md``, ``chips/<architecture>.md`` (``hopper``), ``chips/cpu.md`` (a CPU), ``chips/default.md``.
``languages/<language>.md`` holds a primer and a ```` ```python ```` starter.

A ``ProblemBrief`` holds only what a candidate may see: the visible workloads of the device, with T_SOL and the
binding bound from the roofline (``count_work``, ``workload_report``); never a held-out workload. Feedback shows the
visible workloads of a ``Graded`` alone, and none of its held-out scores.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from string import Template
from typing import Any

from pydantic import BaseModel, Field

from solbench.agents.extract import fenced_blocks
from solbench.agents.types import Budget, Graded, Spent, WorkloadFeedback
from solbench.analysis.heldout import HELDOUT_PREFIX
from solbench.errors import UserError

PACKAGED_TEMPLATES = Path(__file__).resolve().parent / "templates"
LANGUAGE_ALIASES = {"python": "pytorch", "torch": "pytorch"}
BOUND_UNITS = {"memory": "DRAM", "vector": "vector_fp32", "sfu": "special functions", "latency": "launch floor"}
_HIDDEN = re.compile(r"heldout-[\w\-]+|held-out(?:\s+\w+=-?\d+)+")
Dirs = Sequence[str | Path]
BudgetArg = str | tuple | None  # a note, or (Budget, Spent)


def find_template(*names: str, template_dirs: Dirs = ()) -> Path:
    """The first of ``names`` found, each looked up in ``template_dirs``, then in the packaged templates."""
    path = [Path(d).expanduser() for d in template_dirs] + [PACKAGED_TEMPLATES]
    for name in names:
        for d in path:
            if (d / name).is_file():
                return d / name
    raise UserError(f"no template {' or '.join(names)} in {', '.join(str(d) for d in path)}")


def render_template(*names: str, values: dict[str, Any], template_dirs: Dirs = ()) -> str:
    text = find_template(*names, template_dirs=template_dirs).read_text()
    return Template(text).safe_substitute({k: "" if v is None else str(v) for k, v in values.items()})


class Arg(BaseModel):
    name: str
    role: str  # "input", "input, updated in place", "output"
    dtype: str
    shape: list[str] | None = None  # None: a Python scalar


class WorkloadBrief(BaseModel):
    uuid: str
    label: str | None = None
    axes: dict[str, int] = Field(default_factory=dict)  # the workload's own (var) axes
    sol_us: float | None = None
    bound: str | None = None  # memory | tensor | vector | sfu | latency
    unit: str | None = None  # what binds: DRAM, tensor_bf16, ...
    bytes: float | None = None
    flops: dict[str, float] = Field(default_factory=dict)
    error: str | None = None  # why there is no bound


class ProblemBrief(BaseModel):
    """What a candidate is told about one problem on one chip in one language (serialisable)."""
    name: str
    description: str = ""
    reference_source: str
    language: str
    hardware_id: str
    device: str  # "cpu" or "cuda"
    chip: dict[str, str] = Field(default_factory=dict)  # the chip's figures, for the chip template
    chip_templates: list[str] = Field(default_factory=list)  # most specific first
    entry: str = "run"
    dps: bool = True
    args: list[Arg] = Field(default_factory=list)
    code: dict[str, str] = Field(default_factory=dict)  # signature, docstring, alloc, return_line, notes
    axes_doc: str = ""
    tolerance_doc: str = ""
    sol_note: str | None = None
    workloads: list[WorkloadBrief] = Field(default_factory=list)

    @classmethod
    def build(cls, problem, language: str, hardware, *, dps: bool = True, entry: str = "run",
              workloads: Sequence[str] | None = None) -> ProblemBrief:
        """``hardware``: an id ("h200"; "cpu" is this machine, as the evaluator sees it) or a HardwareSpec;
        ``workloads``: the visible uuids (default: every workload of the device). Held-out ones are dropped."""
        from solbench.analysis.roofline import count_work, workload_report
        from solbench.hardware.registry import detect, get_hardware
        from solbench.problems.modules import module_from_source

        spec = hardware if not isinstance(hardware, str) else detect("cpu") if hardware == "cpu" \
            else get_hardware(hardware)
        device = "cpu" if spec.vendor == "cpu" else "cuda"
        d = problem.definition
        chosen = problem.workloads_for(device) if workloads is None else [problem.workload(u) for u in workloads]
        ceilings = spec.ceilings(scale_to_max_clock=True)
        module = module_from_source(problem.reference_source, f"solbench_ref_brief_{problem.name}")
        rows = []
        for w in (w for w in chosen if not w.uuid.startswith(HELDOUT_PREFIX)):
            row = WorkloadBrief(uuid=w.uuid, label=w.label, axes=dict(w.axes))
            try:
                r = workload_report(problem, w, ceilings, count_work(problem, w, module))
            except Exception as exc:  # noqa: BLE001 - an untraceable reference: no bound, and it says so
                row.error = f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0]}"[:200]
            else:
                row.sol_us, row.bound, row.bytes, row.flops = r["sol_ms"] * 1e3, r["bound"], r["bytes"], r["flops"]
                tensor = [u for u, v in r["flops"].items() if v and (u.startswith("tensor_") or u == "matmul_fp32")]
                row.unit = ", ".join(tensor) if r["bound"] == "tensor" else BOUND_UNITS.get(r["bound"])
            rows.append(row)
        arch = (spec.arch or "").split(" ")[0].lower()
        chips = [f"chips/{spec.id.lower()}.md"] + [f"chips/{arch}.md"] * bool(arch) + \
            ["chips/cpu.md"] * (device == "cpu") + ["chips/default.md"]
        return cls(name=problem.name, description=d.description or "", reference_source=problem.reference_source,
                   language=normalise_language(language), hardware_id=spec.id, device=device, chip=chip_facts(spec),
                   chip_templates=chips, entry=entry, dps=dps, args=_args(d), code=_code(d, dps, entry),
                   axes_doc=_axes_doc(d), tolerance_doc=_tolerance_doc(d), sol_note=d.sol.note if d.sol else None,
                   workloads=rows)


def normalise_language(language: str) -> str:
    return LANGUAGE_ALIASES.get(language.lower(), language.lower())


def _g(x: float | None, unit: float = 1.0) -> str:
    return "n/a" if not x else f"{x / unit:.4g}"


def chip_facts(spec) -> dict[str, str]:
    """A chip's figures as template values; compute rates are the ceilings T_SOL uses (scaled to the max clock)."""
    c = spec.ceilings(scale_to_max_clock=True)
    r = {k: _g(c.rates.get(u), 1e12) for k, u in (("bf16_tflops", "tensor_bf16"), ("fp8_tflops", "tensor_fp8"),
         ("tf32_tflops", "tensor_tf32"), ("int8_tops", "tensor_int8"), ("fp32_tflops", "vector_fp32"), ("sfu_tops", "sfu"))}
    fig = {k: _g(getattr(spec, k).value) if getattr(spec, k) else "n/a" for k in ("sm_count", "max_clock_mhz", "dram_gb")}
    return {"chip_name": spec.name, "hardware_id": spec.id, "arch": spec.arch or "unknown architecture", **fig, **r,
            "dram_tbps": _g(c.dram_bytes_per_s, 1e12), "llc_mib": _g(spec.llc_bytes.value, 2**20),
            "launch_floor_us": _g(c.launch_floor_s, 1e-6)}


def _args(d) -> list[Arg]:
    return [Arg(name=n, role="input, updated in place" if n in d.inplace_inputs else "input", dtype=s.dtype,
                shape=s.shape) for n, s in d.inputs.items()] + \
        [Arg(name=n, role="output", dtype=s.dtype, shape=s.shape) for n, s in d.outputs.items()]


def _dim(d, axis: str, depth: int = 0) -> str:
    """A Python expression for an axis's size inside ``run``: an input's shape, a constant, or an expression."""
    from solbench.problems.definition import AxisConst, AxisExpr

    for name, s in d.inputs.items():
        if s.shape and axis in s.shape:
            return f"{name}.shape[{s.shape.index(axis)}]"
    a = d.axes.get(axis)
    if isinstance(a, AxisConst):
        return str(a.value)
    if isinstance(a, AxisExpr) and depth < 8:
        return "(" + re.sub(r"[A-Za-z_]\w*", lambda m: _dim(d, m[0], depth + 1) if m[0] in d.axes else m[0],
                            a.expression) + ")"
    return axis


def _code(d, dps: bool, entry: str) -> dict[str, str]:
    """The signature's pieces: def line, docstring, allocations and return (for a starter), the notes."""
    outs = list(d.outputs)
    doc = [f"{a.name}: " + (f"{a.dtype}[{', '.join(a.shape)}]" if a.shape is not None else f"{a.dtype} scalar "
           "(a Python number)") + (", output: write every element in place" if a.role == "output" else f", {a.role}")
           for a in _args(d) if dps or a.role != "output"]
    doc += [] if dps else [f"returns {n}: {s.dtype}[{', '.join(s.shape or [])}]" for n, s in d.outputs.items()]
    first = next((n for n, s in d.inputs.items() if s.shape is not None), None)
    alloc = [] if dps else [f"    {n} = torch.empty(({', '.join(_dim(d, a) for a in s.shape)}{',' * (len(s.shape) == 1)}"
                            f"), dtype=torch.{s.dtype}, device={f'{first}.device' if first else repr('cuda')})"
                            for n, s in d.outputs.items() if s.shape is not None]
    named = " and ".join(f"`{n}`" for n in outs)
    if dps:
        notes = (f"Destination-passing style: the harness allocates the outputs ({named}) and passes them after the "
                 "inputs, filled with garbage; write every element of each in place. The return value is ignored."
                 ) if outs else "There is no output argument; the return value is ignored."
    else:
        notes = f"Return {named} as new tensors on the inputs' device{' (a tuple, in this order)' * (len(outs) > 1)}." \
            if outs else "Return None."
    if d.inplace_inputs:
        notes += f" {', '.join(f'`{n}`' for n in d.inplace_inputs)}: updated in place, compared after the call."
    params = list(d.inputs) + (outs if dps else [])
    return {"signature": f"def {entry}({', '.join(params)}):", "params": ", ".join(params),
            "docstring": '    """' + "\n    ".join(doc) + '\n    """', "alloc": "\n".join(alloc),
            "return_line": "    return " + (", ".join(outs) if outs and not dps else "None"),
            "signature_notes": notes, "write_note": notes}


def _axes_doc(d) -> str:
    from solbench.problems.definition import AxisConst, AxisExpr

    def one(n, a):
        kind = f"= {a.value}" if isinstance(a, AxisConst) else f"= {a.expression}" if isinstance(a, AxisExpr) else \
            "varies" + (f" ({a.min}..{a.max})" if a.min is not None and a.max is not None else "")
        return f"`{n}` {kind}" + (f": {a.description}" if a.description else "")
    return "; ".join(one(n, a) for n, a in d.axes.items())


def _tolerance_doc(d) -> str:
    from solbench.evaluate.verdict.correctness import tolerance_for

    parts = []
    for n in [*d.outputs, *d.inplace_inputs]:
        s = d.outputs.get(n) or d.inputs[n]
        t = tolerance_for(s.dtype, d.tolerance, tf32=d.allow_tf32)
        parts.append(f"`{n}` ({s.dtype}) exactly" if not s.dtype.startswith(("float", "bfloat")) else
                     f"`{n}` ({s.dtype}): |out - ref| <= {t.atol:g} + {t.rtol:g} x |ref| on at least "
                     f"{(t.matched_ratio or 1) * 100:g}% of elements" + (f", mode {s.compare['mode']}" if s.compare else ""))
    return ("; ".join(parts) or "the inputs after the call") + \
        " (ref: the reference in float64; the reference's own rounding error, doubled, is allowed on top)."


def fmt_us(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.2f}"


def _si(x: float | None, unit: str) -> str:
    if not x:
        return "0" if x == 0 else "n/a"
    scale = next((s for s in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")) if abs(x) >= s[0]), (1.0, ""))
    return f"{x / scale[0]:.3g} {scale[1]}{unit}"


def _bound(w: WorkloadBrief) -> str:
    return f"{w.bound} ({w.unit})" if w.bound and w.unit else (w.bound or f"no bound: {w.error}")


def _axes(axes: dict[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in axes.items())


def budget_note(budget: Budget, spent: Spent) -> str:
    """What is left of a budget, in one line ("" when it has no limits)."""
    left = [f"{max(0, total - used):,} of {total:,} {what}" for what, total, used in (
        ("submissions", budget.submissions, spent.submissions), ("turns", budget.attempts, spent.attempts),
        ("tokens", budget.tokens, spent.usage.total)) if total is not None]
    if budget.usd is not None:
        left.append(f"${max(0.0, budget.usd - spent.usd):.2f} of ${budget.usd:.2f}")
    if budget.wall_s is not None:
        left.append(f"{max(0.0, budget.wall_s - spent.wall_s()) / 60:.0f} of {budget.wall_s / 60:.0f} minutes")
    return f"Budget left: {', '.join(left)}." if left else ""


def _budget(budget: BudgetArg) -> str:
    note = budget_note(*budget) if isinstance(budget, tuple) else (budget or "")
    return f"\n{note}\n" if note else ""


def _language_md(brief: ProblemBrief, template_dirs: Dirs) -> str:
    values = {**brief.chip, **brief.code, "entry": brief.entry, "device": brief.device, "language": brief.language}
    return render_template(f"languages/{brief.language}.md", values=values, template_dirs=template_dirs)


def render_system(brief: ProblemBrief | None = None, template_dirs: Dirs = (), language: str | None = None) -> str:
    values = {"language": language or (brief.language if brief else "the language asked for"),
              "chip_name": brief.chip.get("chip_name", brief.hardware_id) if brief else "the target chip",
              "entry": brief.entry if brief else "run"}
    return render_template("system.md", values=values, template_dirs=template_dirs).strip() + "\n"


def render_task(brief: ProblemBrief, template_dirs: Dirs = (), budget: BudgetArg = None) -> str:
    """The problem statement: definition, reference, signature, workloads with T_SOL and bound, chip, language."""
    table = "\n".join(f"| {i} | {w.label or w.uuid} (`{w.uuid}`) | {_axes(w.axes)} | {fmt_us(w.sol_us)} | {_bound(w)} | "
                      f"{_si(w.bytes, 'B')} | {_si(sum(v for u, v in w.flops.items() if u != 'sfu'), 'FLOP')} |"
                      for i, w in enumerate(brief.workloads, 1))
    args = "\n".join(f"| `{a.name}` | {a.role} | {a.dtype} | "
                     f"{'[' + ', '.join(a.shape) + ']' if a.shape is not None else 'scalar'} |" for a in brief.args)
    chip = render_template(*brief.chip_templates, values=brief.chip, template_dirs=template_dirs).strip()
    values = {**brief.chip, **brief.code, "name": brief.name, "description": brief.description.strip(),
              "language": brief.language, "device": brief.device, "entry": brief.entry,
              "reference": brief.reference_source.strip("\n"), "arg_table": args, "axes_doc": brief.axes_doc,
              "tolerance_doc": brief.tolerance_doc, "workload_table": table, "chip_notes": chip,
              "sol_note": f"\nNote on the bound: {brief.sol_note}\n" if brief.sol_note else "",
              "language_primer": _language_md(brief, template_dirs).strip(), "budget": _budget(budget)}
    return render_template("task.md", values=values, template_dirs=template_dirs).strip() + "\n"


def language_template(language: str, problem, *, dps: bool = True, entry: str = "run", device: str = "cuda",
                      template_dirs: Dirs = ()) -> str:
    """The starter code of ``language`` with the problem's signature filled in (``problem``: a Problem or a brief)."""
    if isinstance(problem, ProblemBrief):
        brief = problem.model_copy(update={"language": normalise_language(language)})
    else:
        brief = ProblemBrief(name=problem.name, reference_source=problem.reference_source, device=device,
                             language=normalise_language(language), hardware_id="", entry=entry, dps=dps,
                             code=_code(problem.definition, dps, entry))
    blocks = [b for b in fenced_blocks(_language_md(brief, template_dirs)) if b.lang in ("python", "py")]
    if not blocks:
        raise UserError(f"the {brief.language} language template has no ```python starter block")
    return blocks[-1].code.replace('    """\n\n    ', '    """\n    ')  # no blank line where $alloc is empty


def _redact(text: str | None) -> str:
    """``text`` less every line, or "; "-separated part of one, that names a held-out workload."""
    lines = ("; ".join(p for p in ln.split("; ") if not _HIDDEN.search(p)) for ln in (text or "").splitlines())
    return "\n".join(ln for ln in lines if ln.strip())


def _trim(log: str, max_chars: int, max_lines: int) -> str:
    lines = _redact(log).rstrip().splitlines()
    text = "\n".join(lines[-max_lines:])[-max_chars:]
    cut = len(lines) - len(text.splitlines())
    return (f"... ({cut} earlier lines cut)\n" if cut > 0 else "") + text


def _failure(w: WorkloadFeedback, known: dict[str, WorkloadBrief]) -> str:
    where = f" ({_axes(known[w.uuid].axes)})" if w.uuid in known else ""
    out = [f"### Failing workload: {w.label or w.uuid} (`{w.uuid}`){where}",
           f"Verdict: {w.verdict}" + (f" ({', '.join(_redact(r) for r in w.reasons)})" if w.reasons else "")]
    f = w.failure or {}
    worst = f["worst"] if isinstance(f.get("worst"), dict) else f if "output" in f else {}
    if worst:  # the seed is not shown: it is derived from the run's secret one
        out.append(f"Worst element: output `{worst.get('output', '?')}` at index {worst.get('index', '?')}: got "
                   f"{worst.get('got')}, expected {worst.get('expected')}" +
                   (f", allowed error {worst['allowed']:.3g}" if worst.get("allowed") is not None else "") +
                   (f" (correctness draw {f['draw']})" if f.get("draw") is not None else "") + ".")
    if w.max_abs_err is not None:
        out.append(f"Max abs error: {w.max_abs_err:.3g}.")
    return "\n".join(out) + "\n"


def render_feedback(graded: Graded, brief: ProblemBrief | None = None, template_dirs: Dirs = (),
                    budget: BudgetArg = None, log_chars: int = 3000, log_lines: int = 40) -> str:
    """What comes back after a graded submission: visible workloads only, never held-out ones or their scores."""
    from solbench.records.verdict import VERDICT_ORDER

    visible = [w for w in graded.visible if not w.uuid.startswith(HELDOUT_PREFIX)]
    known = {x.uuid: x for x in (brief.workloads if brief else [])}
    failing = sorted((w for w in visible if w.verdict != "passed"),
                     key=lambda w: VERDICT_ORDER.index(w.verdict) if w.verdict in VERDICT_ORDER else 0)
    details = bool(failing) or not visible  # else any message or log may be a held-out workload's
    if not details:
        status = "Accepted: every workload passed." if graded.passed else (
            "Every workload shown passed, but the submission is not accepted: it must also be correct for other "
            "valid sizes (within the axes' ranges, with tails that are not multiples of your block sizes).")
    else:
        verdict, reasons = (failing[0].verdict, failing[0].reasons) if failing else (graded.verdict, graded.reasons)
        status = f"Verdict: **{verdict}**" + (f" ({', '.join(_redact(r) for r in reasons)})" if reasons else "") + \
            (f"\n{_redact(graded.message).strip()}" if graded.message else "")
    log = f"\nLog (tail):\n```\n{_trim(graded.log_tail, log_chars, log_lines)}\n```\n" \
        if details and (graded.log_tail or "").strip() else ""
    failure = "\n" + _failure(failing[0], known) if failing else ""
    failure += "Also failing: " + ", ".join(f"`{w.uuid}` ({w.verdict})" for w in failing[1:]) + "\n" \
        if len(failing) > 1 else ""
    rows = []
    for w in visible:
        sol_ms = w.sol_ms if w.sol_ms is not None else \
            known[w.uuid].sol_us / 1e3 if w.uuid in known and known[w.uuid].sol_us is not None else None
        bound = w.bound or (known[w.uuid].bound if w.uuid in known else None) or "n/a"
        rows.append(f"| {w.label or w.uuid} (`{w.uuid}`) | {w.verdict} | {fmt_us(w.time_ms and w.time_ms * 1e3)} | "
                    f"{fmt_us(sol_ms and sol_ms * 1e3)} | {f'{w.time_ms / sol_ms:.2f}x' if w.time_ms and sol_ms else 'n/a'}"
                    f" | {'n/a' if w.sol_score is None else f'{w.sol_score:.3f}'} | {bound} | "
                    f"{fmt_us(w.baseline_ms and w.baseline_ms * 1e3)} |")
    table = ("\n| workload | verdict | time (us) | T_SOL (us) | time / T_SOL | SOL score | bound | baseline (us) |\n"
             "| --- | --- | --- | --- | --- | --- | --- | --- |\n" + "\n".join(rows) + "\n") if rows else ""
    scored = [0.0 if w.verdict != "passed" else w.sol_score for w in visible]
    summary = ""
    if visible and all(s is not None for s in scored):
        summary = f"Mean SOL score over these workloads: {sum(scored) / len(scored):.3f} (0.5 = baseline, 1.0 = SOL)."
        far = max((w for w in visible if w.time_ms and w.sol_ms), key=lambda w: w.time_ms / w.sol_ms, default=None)
        if far is not None and not failing:
            summary += f" Furthest from the speed of light: `{far.uuid}`, {far.time_ms / far.sol_ms:.1f}x T_SOL " \
                       f"({far.bound or 'n/a'} bound)."
    values = {"submission": graded.submission, "status": status, "log": log, "failure": failure, "table": table,
              "summary": summary, "budget": _budget(budget), "language": graded.language}
    text = render_template("feedback.md", values=values, template_dirs=template_dirs)
    return re.sub(r"\n{3,}", "\n\n", text).strip() + "\n"
