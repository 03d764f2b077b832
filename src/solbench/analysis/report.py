"""A problem's analysis as data: work counts and SOL times per workload, in workload-file order."""

from __future__ import annotations

from typing import Any

from solbench.analysis.roofline import count_work, workload_report
from solbench.hardware.spec import Ceilings, HardwareSpec
from solbench.problems.modules import module_from_source
from solbench.problems.problem import Problem


def analyse_problem(problem: Problem, hardware: HardwareSpec, calibrated: Ceilings | None = None) -> dict[str, Any]:
    ceilings = hardware.ceilings(scale_to_max_clock=True)
    module = module_from_source(problem.reference_source, f"solbench_ref_show_{problem.name}")
    rows = []
    for w in problem.workloads:
        try:
            work = count_work(problem, w, module)
            rows.append(workload_report(problem, w, ceilings, work, calibrated))
        except Exception as exc:
            rows.append({"uuid": w.uuid, "label": w.label, "error": f"{type(exc).__name__}: {exc}"})
    return {
        "problem": problem.name,
        "family": problem.family,
        "hardware": hardware.id,
        "ceilings": {"kind": ceilings.kind, "clock_scale": ceilings.clock_scale,
                     "dram_bytes_per_s": ceilings.dram_bytes_per_s, "rates": ceilings.rates,
                     "launch_floor_s": ceilings.launch_floor_s},
        "sol_note": problem.definition.sol.note if problem.definition.sol else None,
        "workloads": rows,
    }
