"""Slots as Ray actors (``--executor ray``): one actor per GPU of the cluster (or per CPU slot asked for), so
the same jobs run across hosts on a cluster engine a lab already runs.

Each actor holds one GPU (Ray sets its CUDA_VISIBLE_DEVICES, so the device lease is per GPU as on one host),
keeps its trusted worker warm, and answers a job with its evaluation (``slot.answer``); the driver, where the
scheduler runs, stores it. The package travels in the job's runtime environment (``py_modules``) when joining an
existing cluster; torch and the kernel languages must be installed on its nodes. Baselines are cached per node
(``<cache>/baselines.db``). An actor that dies (its node lost, its process killed) loses its job, which is put
back and runs on another actor; the slot's actor is made again for its next job.
"""

from __future__ import annotations

import time
from pathlib import Path

from solbench.errors import UserError
from solbench.schedule.devices import Slot
from solbench.schedule.jobs import Job
from solbench.schedule.outcome import Outcome, Tick, answered, unanswered

#: seconds an actor may take to be placed and start
START_S = 300.0


class SlotActor:
    """The actor's body (made a Ray actor class by ``RayExecutor``)."""

    def __init__(self, device: str):
        from solbench.caches import root as cache_root
        from solbench.evaluate.trusted import keeper
        from solbench.store.db import Store

        keeper.judge_for(device)
        self.device = device
        cache_root().mkdir(parents=True, exist_ok=True)
        self.store = Store(cache_root() / "baselines.db")

    def ping(self) -> int:
        import os

        return os.getpid()

    def answer(self, spec_json: str) -> dict:
        from solbench.schedule.slot import answer

        return answer(spec_json, self.device, self.store)


def _package_dir() -> str:
    import solbench

    return str(Path(solbench.__file__).resolve().parent)


class RayExecutor:
    """Slots on a Ray cluster: ``address`` None starts a local instance (``cpu_slots`` CPU slots where it has no
    GPU), "auto" or ``ray://...`` joins one."""

    def __init__(self, address: str | None = None, cpu_slots: int = 1, gpus: int | None = None):
        try:
            import ray
        except ImportError:
            raise UserError("--executor ray needs Ray: pip install 'solbench[ray]'") from None
        self.ray = ray
        if not ray.is_initialized():
            env = {"py_modules": [_package_dir()]} if address else None
            ray.init(address=address, runtime_env=env, include_dashboard=False, log_to_driver=False,
                     **({} if address else {"num_cpus": max(cpu_slots, 1)}))
        n_gpu = int(ray.cluster_resources().get("GPU", 0))
        if gpus is not None:
            n_gpu = min(n_gpu, gpus)
        self.slots = ([Slot(f"ray-gpu:{i}", "cuda") for i in range(n_gpu)] if n_gpu else
                      [Slot(f"ray-cpu:{i}", "cpu") for i in range(cpu_slots)])
        self._cls = ray.remote(SlotActor)
        self._actors: dict[str, object] = {}
        self._pids: dict[str, int] = {}  # slot -> its actor's process, as it answered the first ping
        self._restarts = {s.name: 0 for s in self.slots}

    def _actor(self, slot: Slot):
        actor = self._actors.get(slot.name)
        if actor is None:
            gpu = slot.device == "cuda"
            actor = self._cls.options(num_gpus=1 if gpu else 0, num_cpus=0 if gpu else 1,
                                      max_restarts=0).remote(slot.device)
            self._actors[slot.name] = actor
        return actor

    def warm(self, slot: Slot) -> None:
        """Place and start the slot's actor ahead of its first job."""
        self._started(slot)

    def _started(self, slot: Slot):
        """The slot's actor, placed and answering (None: no node took it within ``START_S``)."""
        fresh = slot.name not in self._actors
        actor = self._actor(slot)
        if fresh:
            ready, _ = self.ray.wait([actor.ping.remote()], timeout=START_S)
            pid = self._get(ready[0]) if ready else None
            if not pid:
                self.recycle(slot)
                return None
            self._pids[slot.name] = pid
        return actor

    def run(self, slot: Slot, job: Job, tick: Tick, tick_s: float, timeout_s: float) -> Outcome:
        ray = self.ray
        actor = self._started(slot)
        if actor is None:
            return Outcome("unavailable", message=f"no node took {slot.name}'s actor within {START_S:.0f} s")
        ref = actor.answer.remote(job.spec.model_dump_json())
        deadline = time.monotonic() + timeout_s
        while True:
            ready, _ = ray.wait([ref], timeout=tick_s)
            if ready:
                msg = self._get(ref)
                if msg is None:
                    self.recycle(slot)
                    return Outcome("lost", message=f"{slot.name}'s actor died during the job")
                return answered(msg)
            ended = unanswered(tick, deadline, timeout_s)
            if ended is not None:
                self.recycle(slot)
                return ended

    def _get(self, ref):
        """The reference's value, or None where its actor or node died."""
        try:
            return self.ray.get(ref)
        except (self.ray.exceptions.RayActorError, self.ray.exceptions.WorkerCrashedError,
                self.ray.exceptions.NodeDiedError, self.ray.exceptions.ObjectLostError):
            return None

    def pid(self, slot: Slot) -> int | None:
        """The slot's actor's process id (on its node), while it has one."""
        return self._pids.get(slot.name) if slot.name in self._actors else None

    def recycle(self, slot: Slot) -> None:
        actor = self._actors.pop(slot.name, None)
        self._pids.pop(slot.name, None)
        if actor is not None:
            self._restarts[slot.name] += 1
            try:
                self.ray.kill(actor, no_restart=True)
            except Exception:
                pass

    def health(self) -> dict[str, dict]:
        return {s.name: {"device": s.device, "pid": self.pid(s), "restarts": self._restarts[s.name]}
                for s in self.slots}

    def close(self) -> None:
        for slot in self.slots:
            actor = self._actors.pop(slot.name, None)
            if actor is not None:
                try:
                    self.ray.kill(actor, no_restart=True)
                except Exception:
                    pass
