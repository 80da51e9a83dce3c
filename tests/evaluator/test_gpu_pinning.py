"""One evaluation worker per GPU, pinned with CUDA_VISIBLE_DEVICES, tested on CPU with
fake device lists: the plan (gpus.py), the worker environment it produces (sandbox.py),
and the Judge's wiring of slots, spares and per-GPU device locks."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from ke_evaluator.judge import EvalOptions, Judge
from ke_evaluator.judge import judge as judge_module
from ke_evaluator.judge.gpus import pin_workers, select_gpus, visible_gpus
from ke_evaluator.judge.options import host_gpus
from ke_evaluator.judge.worker_environment import child_environment
from kernelevolve.config import EvaluatorSettings
from kernelevolve.errors import InvalidArgumentError


@pytest.mark.parametrize(
    ("env", "count", "expected"),
    [
        (None, 4, ["0", "1", "2", "3"]),
        (None, 0, []),
        ("2,3", 8, ["2", "3"]),
        ("3,1", 2, ["3", "1"]),
        ("GPU-aa11,GPU-bb22", 2, ["GPU-aa11", "GPU-bb22"]),
        ("1,,2", 4, ["1"]),  # CUDA stops at the first invalid entry
        ("0,-1,2", 4, ["0"]),
        ("", 4, []),
        ("0,1,2,3", 2, ["0", "1"]),  # more entries than devices: only what the driver counts
    ],
)
def test_visible_gpus(env: str | None, count: int, expected: list[str]) -> None:
    assert visible_gpus(env, count) == expected


def test_select_gpus() -> None:
    vis = ["0", "1", "2", "3"]
    assert select_gpus("", vis) == ["0"]
    assert select_gpus("all", vis) == vis
    assert select_gpus("2, 0", vis) == ["2", "0"]
    assert select_gpus("all", []) == []
    with pytest.raises(InvalidArgumentError, match="not visible"):
        select_gpus("4", vis)
    with pytest.raises(InvalidArgumentError, match="twice"):
        select_gpus("1,1", vis)


@pytest.mark.parametrize(
    ("gpus", "workers", "expected"),
    [
        (["0", "1", "2", "3"], 1, ["0", "1", "2", "3"]),  # at least one per GPU
        (["0", "1"], 2, ["0", "1"]),
        (["0", "1"], 5, ["0", "1", "0", "1", "0"]),
        (["5"], 3, ["5", "5", "5"]),
    ],
)
def test_pin_workers(gpus: list[str], workers: int, expected: list[str]) -> None:
    assert pin_workers(gpus, workers) == expected


def test_pin_workers_needs_a_gpu() -> None:
    with pytest.raises(InvalidArgumentError):
        pin_workers([], 2)


@pytest.mark.parametrize("gpu", ["0", "3", "GPU-aa11"])
def test_worker_environment_sees_its_gpu_alone(tmp_path: Path, gpu: str) -> None:
    env = child_environment({"CUDA_VISIBLE_DEVICES": "0,1,2,3", "TRITON_INTERPRET": "1", "PATH": "/bin"},
                            scratch_dir=str(tmp_path), device="cuda", cuda_visible_devices=gpu, pythonpath="")
    assert env["CUDA_VISIBLE_DEVICES"] == gpu
    assert "TRITON_INTERPRET" not in env


@dataclass
class FakeWorker:
    """Stands for a worker process: records what it would have been started with."""

    cuda_visible_devices: str | None
    lock_dir: str

    def alive(self) -> bool:
        return True

    def kill(self) -> None: ...

    def shutdown(self) -> None: ...


def test_judge_pins_each_slot_and_its_spare_to_one_gpu_with_a_lock_per_gpu(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(judge_module, "resolve_device", lambda device: "cuda")  # a 3-GPU host, faked
    monkeypatch.setattr(judge_module, "WorkerProcess",
                        lambda root, device, opts, lock_dir="": FakeWorker(opts.sandbox.cuda_visible_devices, lock_dir))
    judge = Judge(EvalOptions(device="cuda", gpus=("0", "1", "2"), parallel_workers=4,
                              scratch_dir=tmp_path / "scratch"))
    try:
        assert judge.pins == ["0", "1", "2", "0"] and judge.opts.parallel_workers == 4
        slots = judge._pool.slots
        for slot in slots:
            slot.ensure()  # starts the worker and (on CUDA) its spare
        got = [(s.worker.cuda_visible_devices, s.spare.cuda_visible_devices) for s in slots]  # type: ignore[union-attr]
        assert got == [("0", "0"), ("1", "1"), ("2", "2"), ("0", "0")]
        locks = [s.worker.lock_dir for s in slots]  # type: ignore[union-attr]
        assert locks[0] == locks[3] and len({locks[0], locks[1], locks[2]}) == 3
        assert all(os.path.isfile(os.path.join(d, "device.lock")) for d in locks)
    finally:
        judge.close()


def test_without_gpus_every_worker_shares_one_device_and_lock(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(judge_module, "resolve_device", lambda device: "cuda")
    monkeypatch.setattr(judge_module, "WorkerProcess",
                        lambda root, device, opts, lock_dir="": FakeWorker(opts.sandbox.cuda_visible_devices, lock_dir))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    judge = Judge(EvalOptions(device="cuda", parallel_workers=2, scratch_dir=tmp_path / "scratch"))
    try:
        for slot in judge._pool.slots:
            slot.ensure()
        assert {(s.worker.cuda_visible_devices, s.worker.lock_dir)  # type: ignore[union-attr]
                for s in judge._pool.slots} == {("2", judge.lock_dir)}
    finally:
        judge.close()


def test_evaluator_config_chooses_the_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,3")
    assert host_gpus(EvaluatorSettings(gpus="all"), "nvidia") == ("1", "3")
    assert host_gpus(EvaluatorSettings(gpus=""), "nvidia") == ()
    assert host_gpus(EvaluatorSettings(gpus="3"), "nvidia") == ("3",)
    assert host_gpus(EvaluatorSettings(gpus="all"), "cpu") == ()
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert host_gpus(EvaluatorSettings(gpus="all"), "nvidia") == ("0", "1", "2", "3")
