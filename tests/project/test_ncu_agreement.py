"""benchmarks/ncu_agreement.py on the CPU: its cases, the parsing of Nsight Compute's CSV, the attribution of
kernels to calls, the grouping of CUPTI records, the comparison with the targets, the table and the JSON, and
the bounded subprocess around ncu (a fake ncu stands in for the real one). No GPU is used."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import textwrap
import time

import pytest

from tests.paths import ROOT
from tests.procs import running

BENCH = ROOT / "benchmarks"


def _load(name: str):
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


cases_mod = _load("ncu_cases")
rep = _load("ncu_report")
prof_mod = _load("ncu_profile")
agree = _load("ncu_agreement")

NVTX_COL = "thread Domain:Push/Pop_Range:PL_Type:PL_Value:CLR_Type:Color:Msg_Type:Msg"
HEAD = ["ID", "Process ID", "Process Name", "Host Name", NVTX_COL, "Kernel Name", "Context", "Stream", "Block Size",
        "Grid Size", "Device", "CC", "Section Name", "Metric Name", "Metric Unit", "Metric Value"]


def _q(cells) -> str:
    return ",".join('"' + str(c).replace('"', '""') + '"' for c in cells)


def ncu_csv(kernels, nvtx: bool = True, extra_rows: bool = True) -> str:
    """Output shaped like ``ncu --csv --nvtx`` (details page): ncu's messages, then the header and one row per
    kernel and metric. ``kernels``: (name, value, unit, case index, call index)."""
    lines = ["==PROF== Connected to process 4242 (/usr/bin/python3.11)"]
    lines += [f'==PROF== Profiling "{k[0]}" - {i}: 0%....50%....100% - 1 pass' for i, k in enumerate(kernels)]
    lines += ["==PROF== Disconnected from process 4242", _q(HEAD if nvtx else [h for h in HEAD if h != NVTX_COL])]
    for i, (name, value, unit, ci, call) in enumerate(kernels):
        stack = (f'4242  "<default domain>:{rep.call_range(ci, call)}:none:none:none:none:none:none"  '
                 f'"<default domain>:{rep.PROFILED_RANGE}:none:none:none:none:none:none" ')
        cells = [i, 4242, "python3.11", "127.0.0.1", stack, name, 1, 7, "(256, 1, 1)", "(1, 1, 1)", 0, "9.0",
                 "Command line profiler metrics", rep.METRIC, unit, value]
        if not nvtx:
            cells.pop(4)
        lines.append(_q(cells))
        if extra_rows:  # another metric of the same kernel, which must be ignored
            other = list(cells)
            other[-3:] = ["sm__cycles_elapsed.avg", "cycle", "12,345"]
            lines.append(_q(other))
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- the cases


def test_cases_cover_the_brief():
    cases = cases_mod.CASES
    assert len(cases) >= 12
    assert sum(c.size == "launch-bound" for c in cases) >= 4
    assert sum(c.size == "large" for c in cases) >= 3 and any(c.size == "mid" for c in cases)
    assert any(c.multi for c in cases)
    assert len({c.name for c in cases}) == len(cases)
    assert all(re.fullmatch(r"[a-z0-9_]+", c.name) for c in cases)  # safe in NVTX names and on command lines
    assert all(c.size in cases_mod.SIZES for c in cases)
    assert len({(c.problem, c.workload) for c in cases}) == len(cases)


@pytest.mark.parametrize("case", cases_mod.CASES, ids=lambda c: c.name)
def test_case_resolves_and_its_launch_count_matches_the_source(case):
    problem, workload, path = cases_mod.resolve(case)
    assert workload.runs_on("cuda") and "suite:starter" in problem.definition.tags
    assert path.name == "triton.py" and path.is_file()
    # kernel launches in the solution: `_kernel[grid](` statements (every launch site runs once per call)
    launches = re.findall(r"(?m)^\s*_\w+\[.*\]\(", path.read_text())
    assert len(launches) == case.kernels, launches
    assert bool(case.why) == case.multi
    if case.size == "launch-bound":
        assert "decode" in case.workload


def test_select():
    names = [c.name for c in cases_mod.CASES]
    assert [c.name for c in cases_mod.select(None)] == names
    assert [c.name for c in cases_mod.select("all")] == names
    assert [c.name for c in cases_mod.select(f"{names[3]},1")] == [names[0], names[3]]  # the suite's order
    assert {c.name for c in cases_mod.select("multi")} == {c.name for c in cases_mod.CASES if c.multi}
    assert all(c.size == "launch-bound" for c in cases_mod.select("launch-bound"))
    assert {c.size for c in cases_mod.select("mid,large")} == {"mid", "large"}
    for bad in ("nope", "0", str(len(names) + 1)):
        with pytest.raises(ValueError, match="names no case"):
            cases_mod.select(bad)


def test_parse_args():
    a = agree.parse_args([])
    assert a.ncu_launches >= 3 and a.cupti_calls >= 20 and a.budget_s < 280
    assert a.clocks == {"solbench", "ncu", "cupti"} and len(a.selected) == len(cases_mod.CASES)
    a = agree.parse_args(["--cases", "multi", "--clocks", "ncu,cupti", "--out", "x.json"])
    assert a.clocks == {"ncu", "cupti"} and all(c.multi for c in a.selected) and a.out == "x.json"
    for bad in (["--ncu-launches", "2"], ["--cupti-calls", "19"], ["--cases", "nope"], ["--clocks", "wall"],
                ["--budget-s", "0"], ["--cases", ","]):
        with pytest.raises(SystemExit):
            agree.parse_args(bad)


def test_list_runs_without_a_gpu():
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    proc = subprocess.run([sys.executable, str(BENCH / "ncu_agreement.py"), "--list"], capture_output=True, text=True,
                          timeout=60, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "UNRESOLVED" not in proc.stdout
    for c in cases_mod.CASES:
        assert c.name in proc.stdout and c.workload in proc.stdout
    assert "multi-kernel:" in proc.stdout
    proc = subprocess.run([sys.executable, str(BENCH / "ncu_agreement.py"), "--list", "--cases", "nope"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "names no case" in proc.stderr


# ---------------------------------------------------------------- ncu's CSV and the attribution


def test_parse_ncu_csv_units_messages_and_nvtx():
    text = ncu_csv([("_rmsnorm_kernel", "3.58", "usecond", 0, 0), ("_decode_split", "1,250.5", "nsecond", 1, 0),
                    ("_gemm_kernel", "0.21", "msecond", 2, 0)])
    text += "==WARNING== something ncu says at the end\n"
    ks = rep.parse_ncu_csv(text)
    assert [k["name"] for k in ks] == ["_rmsnorm_kernel", "_decode_split", "_gemm_kernel"]
    assert [k["id"] for k in ks] == [0, 1, 2]
    assert ks[0]["duration_us"] == pytest.approx(3.58)
    assert ks[1]["duration_us"] == pytest.approx(1.2505)
    assert ks[2]["duration_us"] == pytest.approx(210.0)
    assert "sbncu_c01_k00" in ks[1]["nvtx"] and rep.PROFILED_RANGE in ks[1]["nvtx"]


def test_parse_ncu_csv_failures():
    with pytest.raises(ValueError, match="no CSV header"):
        rep.parse_ncu_csv("==PROF== Connected\n==WARNING== No kernels were profiled.\n")
    only_other = ncu_csv([("k", "1", "usecond", 0, 0)]).replace(rep.METRIC, "dram__bytes.sum")
    with pytest.raises(ValueError, match="no gpu__time_duration.sum row"):
        rep.parse_ncu_csv(only_other)
    with pytest.raises(ValueError, match="unknown unit"):
        rep.parse_ncu_csv(ncu_csv([("k", "1", "furlong", 0, 0)], extra_rows=False))


def test_attribute_by_nvtx_sums_the_kernels_of_a_call():
    rows = []
    for call in range(3):
        rows.append(("_rmsnorm_kernel", f"{3.0 + call}", "usecond", 0, call))
    for call in range(3):  # a two-kernel call: split, then merge
        rows += [("_decode_split", f"{10.0 + call}", "usecond", 1, call), ("_decode_merge", "2.0", "usecond", 1, call)]
    rows.append(("stray", "1.0", "usecond", 7, 0))  # a case index the run does not have
    ks = rep.parse_ncu_csv(ncu_csv(rows))
    per_call, method, problems = rep.attribute(ks, ["a", "b"], 3)
    assert method == "nvtx" and problems and "1 profiled kernel" in problems[0]
    a, b = rep.ncu_case_time(per_call["a"]), rep.ncu_case_time(per_call["b"])
    assert a["T_ncu_us"] == pytest.approx(4.0) and a["ncu_kernels_per_call"] == [1, 1, 1]
    assert b["ncu_calls_us"] == pytest.approx([12.0, 13.0, 14.0]) and b["T_ncu_us"] == pytest.approx(13.0)
    assert b["ncu_kernels_per_call"] == [2, 2, 2] and b["ncu_kernel_names"] == ["_decode_split", "_decode_merge"]


def test_attribute_by_order_with_the_cupti_counts():
    rows = [("_k1", "5", "usecond", 0, 0)] * 3 + [("_s", "7", "usecond", 0, 0), ("_m", "1", "usecond", 0, 0)] * 3
    ks = rep.parse_ncu_csv(ncu_csv(rows, nvtx=False))
    per_call, method, problems = rep.attribute(ks, ["a", "skipped", "b"], 3, {"a": 1, "skipped": 1, "b": 2},
                                               ran=["a", "b"])
    assert method == "order" and not problems and set(per_call) == {"a", "b"}
    assert rep.ncu_case_time(per_call["b"])["T_ncu_us"] == pytest.approx(8.0)
    _, _, problems = rep.attribute(ks, ["a", "b"], 3, {"a": 1, "b": 1})
    assert "cannot attribute" in problems[0]
    _, _, problems = rep.attribute(ks, ["a", "b"], 3, {"a": 1})
    assert "no kernel count" in problems[0]


def test_ncu_case_time_without_kernels():
    t = rep.ncu_case_time([[], [], []])
    assert t["T_ncu_us"] is None and t["ncu_kernels_per_call"] == [0, 0, 0]


# ---------------------------------------------------------------- CUPTI records


def _session(calls: int, kernels: list[tuple[str, float]], gap: float = 1.5, memset: bool = True):
    """Device records as the CUPTI phase sees them: per call a spin kernel, the flush, then the call's kernels."""
    ev, t = [], 100.0
    for _ in range(calls):
        ev.append(("spin_kernel(long)", t, t + 60.0))
        ev.append(("reduce_kernel<flush>", t + 60.5, t + 98.0))
        t += 99.0
        if memset:
            ev.append(("Memset (Device)", t, t + 0.5))
        for name, dur in kernels:
            ev.append((name, t, t + dur))
            t += dur + gap
        t += 20.0
    return ev


def test_group_calls_and_spans():
    harness = {"spin_kernel(long)", "reduce_kernel<flush>"}
    events = _session(20, [("_decode_split", 10.0), ("_decode_merge", 2.0)])
    events.reverse()  # the grouping sorts by start time
    groups = rep.group_calls(events, harness)
    assert len(groups) == 20 and all([e[0] for e in g] == ["_decode_split", "_decode_merge"] for g in groups)
    t = rep.cupti_case_time(groups, 20)
    assert t["cupti_error"] is None and t["kernels_per_call"] == 2
    assert t["T_cupti_us"] == pytest.approx(13.5)  # first start to last end: the gap between kernels included
    assert t["cupti_busy_us"] == pytest.approx(12.0)
    one = rep.cupti_case_time(rep.group_calls(_session(25, [("_rmsnorm_kernel", 2.8)]), harness), 25)
    assert one["T_cupti_us"] == pytest.approx(2.8) and one["kernel_names"] == ["_rmsnorm_kernel"]


def test_cupti_case_time_refuses_the_wrong_number_of_calls():
    harness = {"spin_kernel(long)", "reduce_kernel<flush>"}
    t = rep.cupti_case_time(rep.group_calls(_session(19, [("_k", 2.0)]), harness), 20)
    assert t["T_cupti_us"] is None and "19 kernel groups for 20 calls" in t["cupti_error"]
    ev = _session(2, [("_k", 2.0)]) + [("_extra", 1e6, 1e6 + 1)]
    t = rep.cupti_case_time(rep.group_calls(ev, harness), 2)
    assert "differ" in t["cupti_error"]
    assert not rep.is_kernel("Memcpy HtoD (Pageable -> Device)") and rep.is_kernel("_rmsnorm_kernel")


# ---------------------------------------------------------------- the comparison, table and summary


@pytest.mark.parametrize("sb,ncu,cupti,want_ncu,want_cupti", [
    (61.0, 60.0, 60.9, "met", "met"),          # +1.7% of ncu, +0.1 us of CUPTI
    (62.5, 60.0, 62.0, "missed", "missed"),    # +4.2%, +0.5 us
    (58.3, 60.0, 58.5, "met", "met"),          # -2.8%, -0.2 us
    (20.6, 20.0, 20.5, "met", "met"),          # exactly at the threshold: the target applies
    (4.35, 3.6, 2.8, rep.NCU_SMALL, "missed"),  # launch-bound: ncu's cache control, CUPTI's gap reported
    (3.0, 3.6, 2.8, rep.NCU_SMALL, "met"),
    (None, 60.0, 60.0, "n/a", "n/a"),
    (60.0, None, 59.9, "n/a", "met"),
    (60.0, 60.0, None, "met", "n/a"),
])
def test_compare(sb, ncu, cupti, want_ncu, want_cupti):
    c = rep.compare(sb, ncu, cupti)
    assert (c["ncu_target"], c["cupti_target"]) == (want_ncu, want_cupti)
    if sb is not None and ncu:
        assert c["gap_ncu_pct"] == pytest.approx((sb - ncu) / ncu * 100)
    if sb is not None and cupti is not None:
        assert c["gap_cupti_us"] == pytest.approx(sb - cupti)


def _row(name, sb, ncu, cupti, **extra):
    r = {"case": name, "size": "large", "T_solbench_us": sb, "T_ncu_us": ncu, "T_cupti_us": cupti, **extra}
    r.update(rep.compare(sb, ncu, cupti))
    return r


def test_summary_and_table():
    rows = [_row("big_ok", 61.0, 60.0, 60.9, kernels_per_call=1, timing_method="cupti"),
            _row("big_bad", 65.0, 60.0, 62.0, kernels_per_call=2),
            _row("tiny", 4.3, 3.6, 2.8, kernels_per_call=1, size="launch-bound"),
            _row("no_ncu", 5.0, None, 4.9, ncu_error="ncu not found")]
    s = rep.summarize(rows)
    assert (s["ncu_met"], s["ncu_missed"], s["ncu_cache_control"], s["ncu_na"]) == (1, 1, 1, 1)
    assert (s["cupti_met"], s["cupti_missed"], s["cupti_na"]) == (2, 2, 0)
    assert (s["met"], s["missed"], s["cases"]) == (3, 3, 4)
    assert s["ncu_small_gap_us_median"] == pytest.approx(0.7)
    assert s["ncu_minus_cupti_small_us_median"] == pytest.approx(0.8)
    line = rep.summary_line(s)
    assert line.startswith("targets met: 3, missed: 3 over 4 cases") and rep.NCU_SMALL in line
    table = rep.format_table(rows)
    lines = table.splitlines()
    assert "T_solbench" in lines[0] and "T_cupti" in lines[0]
    tiny = next(ln for ln in lines if ln.startswith("tiny"))
    assert rep.NCU_SMALL in tiny and "+19.4%" in tiny and "+1.50" in tiny
    assert "ncu: ncu not found" in table
    assert next(ln for ln in lines if ln.startswith("big_ok")).rstrip().endswith("cupti")


# ---------------------------------------------------------------- the bounded subprocess and a fake ncu


def test_run_bounded_ends_the_whole_group(tmp_path):
    pidfile = tmp_path / "child.pid"
    script = f"sleep 60 & echo $! > {pidfile}; echo started; wait"
    t0 = time.monotonic()
    rc, out, _err, timed_out = prof_mod.run_bounded(["sh", "-c", script], 1.0)
    assert timed_out and time.monotonic() - t0 < 15 and "started" in out
    child = int(pidfile.read_text())
    time.sleep(0.2)
    assert not running(child)
    rc, out, err, timed_out = prof_mod.run_bounded([sys.executable, "-c", "print('hi'); import sys; sys.exit(3)"], 30)
    assert (rc, out.strip(), timed_out) == (3, "hi", False)


FAKE_NCU = '''#!{python}
import json, sys
sys.path.insert(0, {bench!r})
from test_helpers_fake_ncu import main
sys.exit(main(sys.argv[1:], {mode!r}, {csv_path!r}))
'''

FAKE_IMPL = '''
import json, sys
def main(argv, mode, csv_path):
    if argv == ["--version"]:
        print("NVIDIA (R) Nsight Compute Command Line Profiler\\nVersion 2099.1.0.0 (fake)")
        return 0
    log = csv_path + ".argv"
    with open(log, "a") as f:
        f.write(json.dumps(argv) + "\\n")
    m = argv[argv.index("--manifest") + 1]
    names = argv[argv.index("--cases") + 1].split(",")
    json.dump({"cases": names, "ran": names, "errors": {}}, open(m, "w"))
    if mode == "fail":
        print("==ERROR== ERR_NVGPUCTRPERM - no permission to access the GPU performance counters")
        return 1
    if mode == "nested-empty" and "--flat" not in argv:
        print("==WARNING== No kernels were profiled.")
        return 0
    sys.stdout.write(open(csv_path + (".flat" if "--flat" in argv else "")).read())
    return 0
'''


def fake_ncu(tmp_path, mode: str, nested: str, flat: str = "") -> str:
    csv_path = tmp_path / "out.csv"
    csv_path.write_text(nested)
    (tmp_path / "out.csv.flat").write_text(flat or nested)
    (tmp_path / "test_helpers_fake_ncu.py").write_text(FAKE_IMPL)
    exe = tmp_path / "ncu"
    exe.write_text(FAKE_NCU.format(python=sys.executable, bench=str(tmp_path), mode=mode, csv_path=str(csv_path)))
    exe.chmod(0o755)
    return str(exe)


def _two_cases():
    return [c for c in cases_mod.CASES if c.name in ("rmsnorm_t1", "attn_decode_b1_l1024")]


def _rows_for(cases, launches):
    rows = []
    for ci, c in enumerate(cases):
        for call in range(launches):
            if c.multi:
                rows += [("_decode_split", "3.1", "usecond", ci, call), ("_decode_merge", "1.9", "usecond", ci, call)]
            else:
                rows.append(("_rmsnorm_kernel", "3.6", "usecond", ci, call))
    return rows


def test_ncu_times_with_a_fake_ncu(tmp_path):
    cases = _two_cases()
    exe = fake_ncu(tmp_path, "ok", ncu_csv(_rows_for(cases, 3)))
    res = prof_mod.ncu_times(cases, 3, 7, 120, {"rmsnorm_t1": 1, "attn_decode_b1_l1024": 2}, exe)
    assert res["error"] is None and res["attribution"] == "nvtx" and "2099.1" in res["version"]
    assert res["per_case"]["rmsnorm_t1"]["T_ncu_us"] == pytest.approx(3.6)
    assert res["per_case"]["attn_decode_b1_l1024"]["T_ncu_us"] == pytest.approx(5.0)
    argv = json.loads((tmp_path / "out.csv.argv").read_text().splitlines()[0])
    for flag in ("--cache-control", "--clock-control", "--nvtx", "--csv"):
        assert flag in argv
    assert argv[argv.index("--cache-control") + 1] == "all" and argv[argv.index("--clock-control") + 1] == "none"
    assert argv[argv.index("--nvtx-include") + 1] == rep.PROFILED_RANGE + "/"
    assert argv[argv.index("--metrics") + 1] == rep.METRIC and "--flat" not in argv
    assert argv[argv.index("--cases") + 1] == "rmsnorm_t1,attn_decode_b1_l1024"


def test_ncu_times_retries_flat_when_the_nested_filter_matched_nothing(tmp_path):
    cases = _two_cases()
    exe = fake_ncu(tmp_path, "nested-empty", "", ncu_csv(_rows_for(cases, 3), nvtx=False))
    res = prof_mod.ncu_times(cases, 3, 7, 120, {"rmsnorm_t1": 1, "attn_decode_b1_l1024": 2}, exe)
    assert res["error"] is None and res["attribution"] == "order" and res["flat"] is True
    assert res["per_case"]["attn_decode_b1_l1024"]["T_ncu_us"] == pytest.approx(5.0)
    assert len((tmp_path / "out.csv.argv").read_text().splitlines()) == 2


def test_ncu_times_failures(tmp_path, monkeypatch):
    exe = fake_ncu(tmp_path, "fail", "")
    res = prof_mod.ncu_times(_two_cases(), 3, 7, 120, {}, exe)
    assert res["per_case"] == {} and "rc 1" in res["error"] and "ERR_NVGPUCTRPERM" in res["error"]
    assert len((tmp_path / "out.csv.argv").read_text().splitlines()) == 1  # a failed ncu is not retried
    monkeypatch.setattr(prof_mod, "find_ncu", lambda explicit=None: None)
    res = prof_mod.ncu_times(_two_cases(), 3, 7, 120, {}, None)
    assert "ncu not found" in res["error"]


# ---------------------------------------------------------------- the whole script, the GPU clocks faked


def test_main_assembles_table_and_json(tmp_path, monkeypatch, capsys):
    cases = _two_cases()
    exe = fake_ncu(tmp_path, "ok", ncu_csv(_rows_for(cases, 3)))
    monkeypatch.setattr(agree, "device_info", lambda: {"device": "fake H200", "torch": "0"})
    monkeypatch.setattr(agree, "release_memory", lambda: None)
    monkeypatch.setattr(agree, "retire_workers", lambda: None)
    monkeypatch.setattr(agree, "cupti_times", lambda cs, calls, seed, deadline: {
        "rmsnorm_t1": {"T_cupti_us": 2.8, "kernels_per_call": 1, "cupti_error": None},
        "attn_decode_b1_l1024": {"T_cupti_us": 6.1, "kernels_per_call": 2, "cupti_error": None},
        "_harness": {"kernel_names": ["spin"]}})
    monkeypatch.setattr(agree, "solbench_times", lambda cs, deadline: {
        "rmsnorm_t1": {"T_solbench_us": 2.9, "verdict": "passed", "timing_method": "cupti"},
        "attn_decode_b1_l1024": {"T_solbench_us": None, "verdict": "runtime_error", "eval_error": "verdict x"}})
    out = tmp_path / "ncu.json"
    assert agree.main(["--cases", "rmsnorm_t1,attn_decode_b1_l1024", "--ncu", exe, "--ncu-launches", "3",
                       "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "rmsnorm_t1" in printed and rep.NCU_SMALL in printed and "targets met: 1, missed: 0" in printed
    assert "eval: verdict x" in printed
    doc = json.loads(out.read_text())
    rows = {r["case"]: r for r in doc["cases"]}
    r = rows["rmsnorm_t1"]
    assert (r["T_solbench_us"], r["T_ncu_us"], r["T_cupti_us"]) == (2.9, pytest.approx(3.6), 2.8)
    assert r["gap_cupti_us"] == pytest.approx(0.1) and r["cupti_target"] == "met"
    assert r["ncu_target"] == rep.NCU_SMALL and r["gap_ncu_pct"] == pytest.approx((2.9 - 3.6) / 3.6 * 100)
    assert r["timing_method"] == "cupti" and r["problem"] == "rmsnorm" and r["workload"].endswith("decode-t1")
    a = rows["attn_decode_b1_l1024"]
    assert a["multi_kernel"] and a["T_ncu_us"] == pytest.approx(5.0) and a["ncu_kernels_per_call"] == [2, 2, 2]
    assert a["ncu_target"] == "n/a" and a["cupti_target"] == "n/a"
    assert doc["summary"]["met"] == 1 and doc["ncu"]["attribution"] == "nvtx" and doc["device"]["device"] == "fake H200"


def test_main_without_ncu_still_prints_the_other_clocks(monkeypatch, capsys):
    monkeypatch.setattr(agree, "device_info", lambda: {"device": "fake"})
    monkeypatch.setattr(agree, "release_memory", lambda: None)
    monkeypatch.setattr(agree, "retire_workers", lambda: None)
    monkeypatch.setattr(agree, "cupti_times", lambda cs, calls, seed, deadline: {
        c.name: {"T_cupti_us": 60.0, "kernels_per_call": c.kernels} for c in cs})
    monkeypatch.setattr(agree, "solbench_times", lambda cs, deadline: {c.name: {"T_solbench_us": 60.2} for c in cs})
    monkeypatch.setattr(prof_mod, "find_ncu", lambda explicit=None: None)
    assert agree.main(["--cases", "large"]) == 0
    printed = capsys.readouterr().out
    assert "\nncu: ncu not found" in printed
    n = len(cases_mod.select("large"))
    assert f"targets met: {n}, missed: 0 over {n} cases" in printed and "60.20" in printed


RMSNORM_TORCH = """import torch


def run(x, weight, eps):
    xf = x.float()
    return (xf * torch.rsqrt((xf * xf).mean(dim=-1, keepdim=True) + eps) * weight.float()).to(x.dtype)
"""


def test_solbench_times_through_the_public_evaluator_on_the_cpu(tmp_path, monkeypatch):
    """The evaluator's clock as the script reads it, on a tiny CPU workload of a case's problem and a PyTorch
    solution (Triton's interpreter is not timed): the options it passes exist, the fields it reads come back."""
    case = cases_mod.Case("rmsnorm_cpu", "rmsnorm", "rmsnorm-cpu-t4-h256", "launch-bound", 1)
    sol = tmp_path / "torch_rmsnorm.py"
    sol.write_text(RMSNORM_TORCH)
    real = agree.resolve
    monkeypatch.setattr(agree, "resolve", lambda c, device="cuda": (*real(c, device)[:2], sol))
    res = agree.solbench_times([case], time.monotonic() + 300, device="cpu")["rmsnorm_cpu"]
    assert res.get("eval_error") is None, res
    assert res["verdict"] == "passed" and res["T_solbench_us"] > 0 and res["n_samples"] > 0
    assert "timing_method" in res and res["eval_s"] > 0
    late = agree.solbench_times([case], time.monotonic() + 5, device="cpu")["rmsnorm_cpu"]
    assert late["T_solbench_us"] is None and "ran out of time" in late["eval_error"]


def test_cupti_times_glue_with_a_fake_device(monkeypatch):
    """cupti_times' own code with torch's CUDA calls and the profiler faked: each spin kernel, flush and kernel
    of the call becomes a device record, as kineto would hand them back."""
    import types

    import torch

    import solbench.evaluate.timing.rounds as timing

    clock = {"t": 0.0, "records": []}

    def record(name, dur):
        clock["records"].append(types.SimpleNamespace(name=name, device_type=torch.autograd.DeviceType.CUDA,
                                                      time_range=types.SimpleNamespace(start=clock["t"],
                                                                                       end=clock["t"] + dur)))
        clock["t"] += dur + 1.0

    class FakeFlusher:
        def __init__(self, llc, device):
            assert llc >= 60 << 20

        def __call__(self):
            record("reduce_kernel", 40.0)

    class FakeProfile:
        def __init__(self, activities):
            assert activities == [torch.profiler.ProfilerActivity.CUDA]

        def __enter__(self):
            clock["records"] = []
            return self

        def __exit__(self, *exc):
            return False

        def events(self):
            return list(clock["records"]) + [types.SimpleNamespace(
                name="cudaLaunchKernel", device_type=torch.autograd.DeviceType.CPU,
                time_range=types.SimpleNamespace(start=0.0, end=1.0))]

    def fake_call(case, device, seed):
        def fn():
            record("_split", 3.0)
            record("_merge", 1.5)
        return fn, []

    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: types.SimpleNamespace(L2_cache_size=50 << 20))
    monkeypatch.setattr(torch.cuda, "_sleep", lambda cycles: record("spin_kernel", 5.0))
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)
    monkeypatch.setattr(torch.profiler, "profile", FakeProfile)
    monkeypatch.setattr(timing, "Flusher", FakeFlusher)
    monkeypatch.setattr(agree, "build_call", fake_call)
    case = cases_mod.CASES[4]
    out = agree.cupti_times([case], 20, 1, time.monotonic() + 60)
    r = out[case.name]
    assert r["cupti_error"] is None and r["kernels_per_call"] == 2 and r["cupti_calls"] == 20
    assert r["T_cupti_us"] == pytest.approx(5.5) and r["cupti_busy_us"] == pytest.approx(4.5)
    assert r["kernel_names"] == ["_split", "_merge"] and out["_harness"]["kernel_names"] == ["reduce_kernel",
                                                                                             "spin_kernel"]
    late = agree.cupti_times([case], 20, 1, time.monotonic() - 1)
    assert late[case.name]["T_cupti_us"] is None and "out of time" in late[case.name]["cupti_error"]


# ---------------------------------------------------------------- the inputs, made as the evaluator makes them


def test_build_call_and_target_on_the_cpu(tmp_path):
    """Under Triton's interpreter: the case's call on make_inputs' inputs agrees with the reference, and the
    target runs, prints nothing on stdout (ncu's CSV goes there) and records what ran."""
    code = textwrap.dedent(f"""
        import sys, torch
        sys.path.insert(0, {str(BENCH)!r})
        import ncu_cases
        case = next(c for c in ncu_cases.CASES if c.name == "rmsnorm_t1")
        fn, inputs = ncu_cases.build_call(case, "cpu", 5)
        problem, workload, _ = ncu_cases.resolve(case)
        from solbench.problems.inputs import make_inputs
        again = make_inputs(problem.definition, workload, 5, "cpu", problem.directory)
        assert all(torch.equal(a, b) if isinstance(a, torch.Tensor) else a == b for a, b in zip(inputs, again))
        ref = ncu_cases._reference_module(problem).run(*inputs)
        got = fn()
        assert got.shape == ref.shape and torch.allclose(got.float(), ref.float(), atol=2e-2, rtol=2e-2)
        print("ok")
    """)
    env = dict(os.environ, TRITON_INTERPRET="1")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180, env=env)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-2000:]
    manifest = tmp_path / "m.json"
    proc = subprocess.run([sys.executable, str(BENCH / "ncu_target.py"), "--device", "cpu", "--cases",
                           "rmsnorm_t1", "--launches", "3",
                           "--manifest", str(manifest)], capture_output=True, text=True, timeout=180, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout == ""
    m = json.loads(manifest.read_text())
    assert m["ran"] == ["rmsnorm_t1"] and m["errors"] == {} and m["launches"] == 3
    proc = subprocess.run([sys.executable, str(BENCH / "ncu_target.py"), "--device", "cpu", "--cases", "rmsnorm_t1",
                           "--deadline-s", "0", "--manifest", str(manifest)], capture_output=True, text=True,
                          timeout=180, env=env)
    m = json.loads(manifest.read_text())
    assert proc.returncode == 0 and m["ran"] == [] and "deadline" in m["errors"]["rmsnorm_t1"]
