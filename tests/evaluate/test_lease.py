"""The device lease: timed evaluations on one GPU take turns (across threads and processes), checks share it,
slots pinned to different GPUs never wait for each other."""

import threading

import pytest

from solbench.evaluate import lease


@pytest.fixture(autouse=True)
def _own_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("SOLBENCH_LEASE_DIR", str(tmp_path))


def test_the_lease_is_named_for_the_physical_gpu(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    assert lease.lease_name("cuda") == "gpu-3"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-8f2a/x,1")
    assert lease.lease_name("cuda") == "gpu-GPU-8f2a_x" and lease.lease_name("cuda:1") == "gpu-1"
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert lease.lease_name("cuda:2") == "gpu-2" and lease.lease_name("cpu") is None


def _second_holder(device: str, exclusive: bool) -> tuple[threading.Thread, threading.Event]:
    entered = threading.Event()

    def hold():
        with lease.hold(device, exclusive=exclusive):
            entered.set()

    t = threading.Thread(target=hold, daemon=True)
    t.start()
    return t, entered


@pytest.mark.parametrize("device", ["cuda", "cpu"])
def test_a_timed_evaluation_waits_for_the_one_holding_the_device(device, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    with lease.hold(device):
        t, entered = _second_holder(device, exclusive=True)
        assert not entered.wait(0.3)  # still waiting while the first holds it
    t.join(30)
    assert entered.is_set()


def test_checks_share_the_lease_and_a_timed_one_waits_for_them(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    with lease.hold("cuda", exclusive=False):
        t, entered = _second_holder("cuda", exclusive=False)
        t.join(30)
        assert entered.is_set()  # a second check ran beside the first
        timed, timed_in = _second_holder("cuda", exclusive=True)
        assert not timed_in.wait(0.3)
    timed.join(30)
    assert timed_in.is_set()


def test_slots_on_different_gpus_do_not_wait(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    with lease.hold("cuda:0"):
        t, entered = _second_holder("cuda:1", exclusive=True)
        t.join(30)
        assert entered.is_set()


def test_a_lease_folder_that_is_a_link_is_not_used(tmp_path, monkeypatch):
    target = tmp_path / "elsewhere"
    target.mkdir()
    (tmp_path / "links").mkdir()
    (tmp_path / "links" / "solbench-leases").symlink_to(target)
    monkeypatch.setenv("SOLBENCH_LEASE_DIR", str(tmp_path / "links"))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    with lease.hold("cuda"):
        pass
    assert list(target.iterdir()) == []  # nothing made through the link
    assert (tmp_path / "links" / f"solbench-leases-{__import__('os').getuid()}" / "gpu-0.lock").exists()
