"""The platform layer (hardware/platform.py) and ``solbench compare`` (cli_compare.py), on the CPU: detection, a
FAKE platform plug-in through every hook, the AMD plug-in with a monkeypatched ROCm torch, and a database holding
one solution's results from two chips."""

import json
import sys
import types
from typing import ClassVar

import pytest
import torch
from typer.testing import CliRunner

from solbench.cli_compare import compare, compare_rows
from solbench.errors import UserError
from solbench.records.verdict import Evaluation, WorkloadResult
from solbench.guard import GuardedTyper
from solbench.hardware import platform as plat
from solbench.hardware.platform import (AmdPlatform, CpuPlatform, NvidiaPlatform, Platform, detect_platform,
                                        register_platform, registered_platforms, unregister_platform)
from solbench.store.db import Store


@pytest.fixture(autouse=True)
def _clean(monkeypatch):
    monkeypatch.delenv(plat.ENV_OVERRIDE, raising=False)
    before = list(plat._REGISTRY)
    yield
    plat._REGISTRY[:] = before


# ---------------------------------------------------------------- this machine

def test_cpu_machine_detects_the_cpu_platform():
    p = detect_platform("cpu")
    assert type(p) is CpuPlatform and p.vendor == "cpu" and p.clock_source == "none"
    assert p.id.startswith("cpu:") and p.arch and p.available()
    assert p.telemetry() == {}
    free = p.free_memory_bytes()
    assert free is None or free > 0
    rec = p.record()
    assert json.loads(json.dumps(rec)) == rec
    assert rec["id"] == p.id and rec["clock_source"] == "none" and rec["selected_by"] == "detection"
    assert rec["device_name"]


def test_unknown_device_and_no_gpu_are_user_errors():
    with pytest.raises(UserError, match="unknown device"):
        detect_platform("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(UserError, match="no platform serves it"):
            detect_platform("cuda")
        assert not NvidiaPlatform("cuda").available() and not AmdPlatform("cuda").available()


# ---------------------------------------------------------------- a fake vendor through every hook

class FakePlatform(Platform):
    vendor = "fakevendor"
    clock_source = "fakesmi"
    calls: ClassVar[list] = []

    @property
    def arch(self):
        return "fk1"

    def available(self):
        self.calls.append("available")
        return self.kind == "cuda"

    def device_name(self, index=None):
        self.calls.append(("device_name", self._index(index)))
        return f"Fake Accelerator {self._index(index)}"

    def telemetry(self, index=None):
        self.calls.append(("telemetry", self._index(index)))
        return {"sm_clock_mhz": 1234.0, "max_sm_clock_mhz": 2000.0, "temperature_c": 55.0, "power_w": 300.0}

    def free_memory_bytes(self, index=None):
        self.calls.append(("free_memory_bytes", self._index(index)))
        return 64 << 30

    def runtime(self):
        return {"runtime": "fakert", "runtime_version": "9.9"}


def test_fake_platform_selected_by_env_exercises_every_hook(monkeypatch):
    FakePlatform.calls = []
    assert register_platform(FakePlatform) is FakePlatform
    assert registered_platforms()[0] is FakePlatform  # the latest plug-in of the top priority is probed first
    for prefix in ("fakevendor", "fakevendor:fk1", "FAKEVENDOR:FK"):
        monkeypatch.setenv(plat.ENV_OVERRIDE, prefix)
        p = detect_platform("cuda:1")
        assert type(p) is FakePlatform and p.index == 1
    assert p.id == "fakevendor:fk1" and p.vendor == "fakevendor" and p.arch == "fk1"
    assert p.clock_source == "fakesmi"
    assert p.available() and not FakePlatform("cpu").available()
    assert p.device_name() == "Fake Accelerator 1" and p.device_name(0) == "Fake Accelerator 0"
    assert p.telemetry()["sm_clock_mhz"] == 1234.0 and set(p.telemetry()) <= set(plat.TELEMETRY_KEYS)
    assert p.free_memory_bytes() == 64 << 30
    rec = p.record()
    assert json.loads(json.dumps(rec)) == rec
    assert rec == {"id": "fakevendor:fk1", "vendor": "fakevendor", "arch": "fk1", "device": "cuda:1", "index": 1,
                   "device_name": "Fake Accelerator 1", "clock_source": "fakesmi", "selected_by": "SOLBENCH_PLATFORM",
                   "runtime": "fakert", "runtime_version": "9.9"}
    assert {c if isinstance(c, str) else c[0] for c in FakePlatform.calls} == {
        "available", "device_name", "telemetry", "free_memory_bytes"}
    # without the override, detection itself finds it for the device it serves, and the CPU still gets the CPU
    monkeypatch.delenv(plat.ENV_OVERRIDE)
    assert type(detect_platform("cuda")) is FakePlatform
    assert type(detect_platform("cpu")) is CpuPlatform
    # an override naming nothing registered is one line
    monkeypatch.setenv(plat.ENV_OVERRIDE, "fakevendor:fk2")
    with pytest.raises(UserError, match="names no registered platform") as e:
        detect_platform("cuda")
    assert "\n" not in str(e.value)
    unregister_platform(FakePlatform)
    monkeypatch.setenv(plat.ENV_OVERRIDE, "fakevendor")
    with pytest.raises(UserError):
        detect_platform("cuda")


def test_register_platform_replaces_a_vendor_and_rejects_non_platforms():
    class Other(FakePlatform):
        pass

    register_platform(FakePlatform)
    register_platform(Other)
    assert FakePlatform not in registered_platforms() and Other in registered_platforms()
    with pytest.raises(TypeError):
        register_platform(object)


# ---------------------------------------------------------------- AMD through PyTorch's ROCm build, faked

@pytest.fixture
def rocm_torch(monkeypatch):
    props = types.SimpleNamespace(name="AMD Instinct MI300X", gcnArchName="gfx942:sramecc+:xnack-", major=9,
                                  minor=4, multi_processor_count=304, total_memory=192 << 30, pci_bus_id=0x0C)
    monkeypatch.setattr(torch.version, "hip", "6.2.41133", raising=False)
    monkeypatch.setattr(torch.version, "cuda", None, raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i=0: props)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i=0: props.name)
    return props


def _fake_amdsmi(monkeypatch):
    m = types.ModuleType("amdsmi")
    m.AmdSmiClkType = types.SimpleNamespace(GFX="gfx", MEM="mem")
    m.AmdSmiTemperatureType = types.SimpleNamespace(HOTSPOT="hotspot", EDGE="edge")
    m.AmdSmiTemperatureMetric = types.SimpleNamespace(CURRENT="current")
    m.AmdSmiMemoryType = types.SimpleNamespace(VRAM="vram")
    handles = ["h-bus-03", "h-bus-0c"]  # torch's device 0 is amdsmi's second device (matched by PCI bus)
    m.amdsmi_init = lambda *a: None
    m.amdsmi_get_processor_handles = lambda: handles
    m.amdsmi_get_gpu_device_bdf = lambda h: {"h-bus-03": "0000:03:00.0", "h-bus-0c": "0000:0c:00.0"}[h]
    m.amdsmi_get_clock_info = lambda h, k: {"clk": 2100 if k == "gfx" else 1300, "max_clk": 2100 if k == "gfx"
                                           else 1300, "min_clk": 500} if h == "h-bus-0c" else {}
    m.amdsmi_get_temp_metric = lambda h, s, mt: (_ for _ in ()).throw(RuntimeError("no edge")) if s == "edge" else 61
    m.amdsmi_get_power_info = lambda h: {"current_socket_power": "N/A", "average_socket_power": 512,
                                         "power_limit": 750}
    m.amdsmi_get_gpu_memory_total = lambda h, t: 192 << 30
    m.amdsmi_get_gpu_memory_usage = lambda h, t: 2 << 30
    m.amdsmi_get_gpu_driver_info = lambda h: {"driver_name": "amdgpu", "driver_version": "6.8.5"}
    monkeypatch.setitem(sys.modules, "amdsmi", m)
    return m


def test_amd_platform_id_and_arch_from_a_rocm_torch(rocm_torch, monkeypatch):
    p = detect_platform("cuda")
    assert type(p) is AmdPlatform and p.selected_by == "detection"
    assert p.id == "amd:gfx942" and p.arch == "gfx942" and p.target == "gfx942:sramecc+:xnack-"
    assert p.vendor == "amd" and p.clock_source == "amdsmi" and p.available()
    assert not NvidiaPlatform("cuda").available()  # a ROCm torch has torch.version.cuda None, hip set
    assert p.device_name() == "AMD Instinct MI300X"
    assert not AmdPlatform("cuda:2").available()  # torch sees 2 devices
    monkeypatch.setitem(sys.modules, "amdsmi", None)  # amdsmi not installed: no telemetry, nothing raised
    assert p.telemetry() == {} and p.free_memory_bytes() is None
    rec = p.record()
    assert json.loads(json.dumps(rec)) == rec
    assert rec["id"] == "amd:gfx942" and rec["runtime"] == "hip" and rec["runtime_version"] == "6.2.41133"
    monkeypatch.setenv(plat.ENV_OVERRIDE, "amd:gfx9")
    assert type(detect_platform("cuda")) is AmdPlatform


def test_amd_telemetry_through_a_fake_amdsmi(rocm_torch, monkeypatch):
    _fake_amdsmi(monkeypatch)
    p = AmdPlatform("cuda:0")
    t = p.telemetry()
    assert set(t) == set(plat.TELEMETRY_KEYS)
    assert t["sm_clock_mhz"] == 2100 and t["max_mem_clock_mhz"] == 1300  # from the handle on PCI bus 0x0c
    assert t["temperature_c"] == 61 and t["power_w"] == 512 and t["power_limit_w"] == 750
    assert p.free_memory_bytes() == 190 << 30
    assert p.record()["driver"] == "6.8.5"


def test_amd_arch_unknown_without_properties(monkeypatch):
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i=0: (_ for _ in ()).throw(RuntimeError("x")))
    p = AmdPlatform("cuda")
    assert p.arch == "unknown" and p.id == "amd:unknown" and not p.available()


def test_nvidia_arch_from_properties(monkeypatch):
    monkeypatch.setattr(torch.cuda, "get_device_properties",
                        lambda i=0: types.SimpleNamespace(name="NVIDIA H100 80GB HBM3", major=9, minor=0))
    assert NvidiaPlatform("cuda").id == "nvidia:sm_90"


# ---------------------------------------------------------------- solbench compare

def _ev(sol_digest, hardware, device_name, platform_id, verdict, score, speedup, language="pytorch", solution="k"):
    return Evaluation(problem="axpy", problem_dir="/x/axpy", problem_digest="pd1", solution=solution,
                      solution_digest=sol_digest, language=language, hardware=hardware,
                      device="cuda" if hardware != "cpu" else "cpu", device_name=device_name, verdict=verdict,
                      sol_score=score, mean_speedup_vs_eager=speedup,
                      environment={"platform": {"id": platform_id}} if platform_id else {},
                      workloads=[WorkloadResult(uuid="w1", verdict=verdict, sol_score=score)])


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "multi.db"
    s = Store(path)
    for ev in (_ev("abc", "h100-sxm", "NVIDIA H100 80GB HBM3", "nvidia:sm_90", "passed", 0.61, 1.8),
               _ev("abc", "mi300x", "AMD Instinct MI300X", "amd:gfx942", "passed", 0.42, 1.3),
               _ev("abc", "mi300x", "AMD Instinct MI300X", "amd:gfx942", "incorrect", 0.0, None),  # the latest
               _ev("lonely", "h100-sxm", "NVIDIA H100 80GB HBM3", "nvidia:sm_90", "passed", 0.5, 1.1,
                   solution="only_on_one"),
               _ev("tri", "h100-sxm", "NVIDIA H100 80GB HBM3", None, "passed", 0.77, 2.5, language="triton",
                   solution="tk")):
        s.add_evaluation(ev, "{}")
    s.close()
    return path


def _app():
    app = GuardedTyper(add_completion=False, pretty_exceptions_enable=False)
    app.command("compare")(compare)

    @app.callback()
    def _root():
        pass
    return app


def _invoke(*args):
    return CliRunner().invoke(_app(), ["compare", *[str(a) for a in args]])


def test_compare_by_hardware_one_row_with_both_platforms(db):
    data = compare_rows(db, "hardware")
    assert data["columns"] == ["h100-sxm", "mi300x"]
    assert len(data["rows"]) == 1  # the solutions seen on one chip only are left out
    row = data["rows"][0]
    assert row["problem"] == "axpy" and row["solution_digest"] == "abc"
    h, m = row["hardware"]["h100-sxm"], row["hardware"]["mi300x"]
    assert (h["verdict"], h["sol_score"], h["mean_speedup"], h["platform"]) == ("passed", 0.61, 1.8, "nvidia:sm_90")
    assert (m["verdict"], m["platform"], m["evaluations"]) == ("incorrect", "amd:gfx942", 2)

    r = _invoke("--db", db, "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout) == json.loads(json.dumps(data))
    r = _invoke("--db", db)
    assert r.exit_code == 0, r.output
    line = next(ln for ln in r.stdout.splitlines() if "axpy" in ln)
    assert "passed" in line and "incorrect" in line and "0.610" in line


def test_compare_by_language(db):
    data = compare_rows(db, "language", problem="axpy")
    assert data["columns"] == ["pytorch", "triton"]
    [row] = data["rows"]
    assert row["hardware"] == "h100-sxm"
    assert row["languages"]["triton"]["sol_score"] == 0.77 and row["languages"]["pytorch"]["sol_score"] == 0.61
    r = _invoke("--db", db, "--by", "language", "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["by"] == "language"
    r = _invoke("--db", db, "--problem", "nothing_here")
    assert r.exit_code == 0 and "no solution evaluated on more than one hardware" in r.stdout


def test_compare_splits_one_hardware_id_held_by_two_chips(tmp_path):
    s = Store(tmp_path / "cpus.db")
    s.add_evaluation(_ev("x", "cpu", "x86_64", "cpu:x86_64", "passed", 0.3, 1.0), "{}")
    s.add_evaluation(_ev("x", "cpu", "aarch64", "cpu:aarch64", "passed", 0.2, 0.9), "{}")
    s.close()
    data = compare_rows(tmp_path / "cpus.db")
    assert data["columns"] == ["cpu (aarch64, cpu:aarch64)", "cpu (x86_64, cpu:x86_64)"]
    assert len(data["rows"]) == 1


@pytest.mark.parametrize("make,args,needle", [
    (False, ["--db", "{tmp}/missing.db"], "no database at"),
    (True, ["--db", "{db}", "--by", "vendor"], "--by must be one of hardware, language"),
    ("junk", ["--db", "{tmp}/junk.db"], "not a solbench database"),
])
def test_compare_errors_are_one_line_exit_2(tmp_path, db, make, args, needle):
    if make == "junk":
        (tmp_path / "junk.db").write_bytes(b"this is not sqlite" * 100)
    r = _invoke(*[a.format(tmp=tmp_path, db=db) for a in args])
    assert r.exit_code == 2
    lines = [ln for ln in r.stderr.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in r.output, r.output
