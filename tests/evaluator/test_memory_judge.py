"""The Judge's memory admission with real CPU workers and a fake device of given sizes:
a spec's footprint is measured once and reported, an out-of-memory error while another job
shares the GPU is re-run alone and never becomes the verdict, one that happens alone
becomes "needs about X GiB, the device has Y GiB", and a job larger than the whole device
still runs (alone)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ke_evaluator.judge import EvalOptions, Judge, SandboxOptions, WorkerPoolOptions
from ke_evaluator.judge.memory_admission import FixedDeviceMemory

from .sources import candidate, example

GIB = 2**30
RELU = "relu_scale_add"
_FORWARD = "    def forward(self, x: torch.Tensor) -> torch.Tensor:\n"
# What torch raises when the caching allocator cannot get a block (constructible on the CPU).
_OOM = 'raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 6.00 GiB. GPU 0 has a total capacity")'


def _with_forward_prologue(prologue: str) -> str:
    src = candidate("ok_relu_scale_add")
    assert _FORWARD in src
    return src.replace(_FORWARD, _FORWARD + prologue)


def _oom_once(marker: Path) -> str:
    """Runs out of memory on its first call ever (a marker file remembers), then is correct."""
    return _with_forward_prologue(
        f"        import os\n"
        f"        if not os.path.exists({str(marker)!r}):\n"
        f"            open({str(marker)!r}, 'w').close()\n"
        f"            {_OOM}\n")


@pytest.fixture(scope="module")
def device() -> FixedDeviceMemory:
    return FixedDeviceMemory(free_bytes=64 * GIB, total_bytes=80 * GIB)


@pytest.fixture(scope="module")
def mem_judge(tmp_path_factory: pytest.TempPathFactory, device: FixedDeviceMemory) -> Iterator[Judge]:
    # Static policy off and no file-system jail: the test candidates below keep a marker file.
    opts = EvalOptions(device="cpu", correctness_trials=2, time_candidates=False, compile_timeout_s=60.0,
                       run_timeout_s=60.0, enforce_static_policy=False,
                       sandbox=SandboxOptions(filesystem_isolation=False),
                       pool=WorkerPoolOptions(reuse_worker_after_failure=True, spare_worker=False),
                       scratch_dir=str(tmp_path_factory.mktemp("mem")))
    with Judge(opts, device_memory=device) as j:
        yield j


def _measured(judge: Judge) -> None:
    """The spec's first job: runs alone (footprint unknown) and measures it."""
    if judge.footprint(example(RELU)) is None:
        v = judge.evaluate(example(RELU), candidate("ok_relu_scale_add"), candidate_id="first")
        assert v.status == "correct", v.reason
        assert v.evidence["memory"]["admission"]["alone"] is True
        assert v.evidence["memory"]["admission"]["need_bytes"] is None


def test_footprint_is_measured_once_kept_and_reported(mem_judge: Judge, device: FixedDeviceMemory) -> None:
    device.free_bytes = 64 * GIB
    _measured(mem_judge)
    fp = mem_judge.footprint(example(RELU))
    assert fp is not None and fp.method == "cpu estimate from tensor sizes"
    spec: dict[str, Any] = {}
    exec(compile(example(RELU), "spec", "exec"), spec)  # noqa: S102 - our own example spec
    x, = spec["get_inputs"]()
    model = spec["Model"](*spec["get_init_inputs"]())
    assert fp.inputs_bytes == x.numel() * x.element_size()
    assert fp.parameters_bytes == sum(p.numel() * p.element_size() for p in model.parameters())
    assert fp.outputs_bytes == fp.inputs_bytes
    v = mem_judge.evaluate(example(RELU), candidate("ok_relu_scale_add"), candidate_id="second")
    assert v.status == "correct", v.reason
    mem = v.evidence["memory"]
    assert mem["footprint"]["need_bytes"] == fp.need_bytes
    assert mem["admission"]["alone"] is False  # measured and small: may share the GPU
    assert mem["admission"]["reserved_bytes"] == int(fp.need_bytes * mem_judge.opts.pool.memory_margin)
    assert mem["job"]["inputs_bytes"] == fp.inputs_bytes  # the worker's own measurement


def test_out_of_memory_beside_another_job_is_rerun_alone_and_is_not_the_verdict(
        mem_judge: Judge, device: FixedDeviceMemory, tmp_path: Path) -> None:
    device.free_bytes = 64 * GIB
    _measured(mem_judge)
    adm = mem_judge.admission(0)
    assert adm is not None
    result: dict[str, object] = {}
    with adm.admit(GIB) as neighbour:  # another evaluation holds part of the GPU meanwhile

        def run() -> None:
            result["v"] = mem_judge.evaluate(example(RELU), _oom_once(tmp_path / "ran"), candidate_id="oom-once")

        t = threading.Thread(target=run)
        t.start()
        # The first attempt ran beside the neighbour and ran out of memory; the re-run
        # waits for the GPU to be idle.
        for _ in range(6000):
            if adm.waiting == 1 or not t.is_alive():
                break
            threading.Event().wait(0.02)
        assert adm.waiting == 1 and (tmp_path / "ran").exists()
        assert neighbour.shared
    t.join(180)
    v = result["v"]
    assert v.status == "correct", v.reason  # type: ignore[attr-defined]
    mem = v.evidence["memory"]  # type: ignore[attr-defined]
    assert mem["rerun_alone"] is True
    assert "OutOfMemoryError" in mem["first_attempt"]["reason"]
    assert mem["first_attempt"]["admission"]["shared"] is True
    assert mem["admission"]["alone"] is True and mem["admission"]["shared"] is False


def test_out_of_memory_alone_says_what_it_needs_against_what_the_device_has(
        mem_judge: Judge, device: FixedDeviceMemory) -> None:
    device.free_bytes, device.total_bytes = 2 * GIB, 2 * GIB
    try:
        _measured(mem_judge)
        v = mem_judge.evaluate(example(RELU), _with_forward_prologue(f"        {_OOM}\n"), candidate_id="oom")
    finally:
        device.free_bytes, device.total_bytes = 64 * GIB, 80 * GIB
    assert v.status == "runtime_error"
    assert "needs about 6.0 GiB, the device has 2.0 GiB" in v.reason, v.reason
    assert "rerun_alone" not in v.evidence["memory"]  # nothing shared the GPU: nothing to retry


def test_a_job_larger_than_the_whole_device_runs_alone_instead_of_waiting_forever(
        mem_judge: Judge, device: FixedDeviceMemory) -> None:
    _measured(mem_judge)
    device.free_bytes = 4096  # far below the spec's footprint
    try:
        v = mem_judge.evaluate(example(RELU), candidate("ok_relu_scale_add"), candidate_id="big")
    finally:
        device.free_bytes = 64 * GIB
    assert v.status == "correct", v.reason
    assert v.evidence["memory"]["admission"]["alone"] is True
    assert v.evidence["memory"]["admission"]["capacity_bytes"] == 4096


def test_a_validated_spec_shares_the_gpu_from_its_first_job(mem_judge: Judge, device: FixedDeviceMemory) -> None:
    """Validation measures the sizes the estimate needs (``info["memory"]``): the spec's
    first evaluation reserves the estimate instead of running alone to be measured."""
    device.free_bytes = 64 * GIB
    spec = example(RELU) + "\n# validated first (a spec of its own for the footprints)\n"
    check = mem_judge.validate_spec(spec, RELU)
    assert check.ok, check.reason
    sizes = check.info["memory"]
    assert sizes["inputs_bytes"] > 0 and sizes["reference_peak_bytes"] >= sizes["outputs_bytes"] > 0
    fp = mem_judge.footprint(spec)
    assert fp is not None and fp.method == "estimate from spec validation"
    assert fp.need_bytes >= 2 * (fp.inputs_bytes + fp.outputs_bytes)
    v = mem_judge.evaluate(spec, candidate("ok_relu_scale_add"), candidate_id="after-validation")
    assert v.status == "correct", v.reason
    adm = v.evidence["memory"]["admission"]
    assert adm["need_bytes"] == fp.need_bytes and adm["alone"] is False
    assert mem_judge.footprint(spec).method == "cpu estimate from tensor sizes"  # the job's own measurement now


def test_a_screen_is_admitted_with_the_full_footprint_until_it_measured_its_own(
        mem_judge: Judge, device: FixedDeviceMemory) -> None:
    """A screen holds less than a full job: it learns a footprint of its own, and a full job
    of the spec is never admitted with a screen's."""
    device.free_bytes = 64 * GIB
    _measured(mem_judge)
    full = mem_judge.footprint(example(RELU))
    assert full is not None
    first = mem_judge.evaluate(example(RELU), candidate("ok_relu_scale_add"), candidate_id="s1", tier="screen")
    assert first.status == "correct" and first.tier == "screen", first.reason
    assert first.evidence["memory"]["admission"]["need_bytes"] == full.need_bytes  # the full one, an upper bound
    own = first.evidence["memory"]["footprint"]["need_bytes"]
    assert own < full.need_bytes  # one input set, no audit (CPU estimate: 0.13 MB against 1.9 MB)
    second = mem_judge.evaluate(example(RELU), candidate("ok_relu_scale_add"), candidate_id="s2", tier="screen")
    assert second.evidence["memory"]["admission"]["need_bytes"] == own
    later = mem_judge.evaluate(example(RELU), candidate("ok_relu_scale_add"), candidate_id="f")
    assert later.evidence["memory"]["admission"]["need_bytes"] == mem_judge.footprint(example(RELU)).need_bytes
