"""One contract suite for the device port (``ke_evaluator.backends``), run against every
adapter: the CPU interpreter always, the CUDA and ROCm adapters in every part that needs no
device (pinning variables, peak tables, registry) and in the device parts where their
device is present, and a fake backend registered from outside the package, through which
a whole judged evaluation runs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from ke_evaluator import backends
from ke_evaluator.backends import DeviceBackend, EventTimer, registry
from ke_evaluator.backends.rocm import flush_bytes_for
from ke_evaluator.judge import EvalOptions, Judge, TimingOptions, WorkerPoolOptions, resolve_device
from ke_evaluator.judge.options import device_of_kind
from ke_evaluator.judge.worker_environment import child_environment
from ke_evaluator.worker import memory, timing
from kernelevolve.errors import InvalidArgumentError
from tests.contracts.fake_device_backend import FAKE_DEVICE_NAME, FakeBackend
from tests.contracts.test_judge_port import SPEC, TRITON

# A device name each accelerated adapter's peak table must know (as torch reports it).
KNOWN_DEVICE = {"cuda": "NVIDIA H100 80GB HBM3", "rocm": "AMD Instinct MI300X", "fake": FAKE_DEVICE_NAME}
ALL_VISIBILITY = ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "FAKE_VISIBLE_DEVICES")


@pytest.fixture
def fake_registered() -> Iterator[None]:
    backends.register_backend("fake", FakeBackend, kinds=("fakeaccel",))
    yield
    backends.unregister_backend("fake")


@pytest.fixture(params=["cpu", "cuda", "rocm", "fake"])
def backend(request: pytest.FixtureRequest) -> Iterator[DeviceBackend]:
    if request.param == "fake":
        request.getfixturevalue("fake_registered")
    yield backends.get_backend(request.param)


def _device(backend: DeviceBackend) -> torch.device:
    """The backend's device, started; skips where this machine has none."""
    if not backend.available():
        pytest.skip(f"no {backend.name} device here")
    device = backend.torch_device()
    backend.start(device)
    return device


# -- parts that need no device ----------------------------------------------------------------
def test_is_one_registered_backend(backend: DeviceBackend) -> None:
    assert isinstance(backend, DeviceBackend)
    assert backend.name in backends.names()
    assert backends.get_backend(backend.name) is backend  # one instance per process
    assert backend.torch_device_type in ("cpu", "cuda")
    assert backend.clock


@pytest.mark.parametrize(("kind", "name"), [
    ("nvidia", "cuda"), ("nvidia-h100", "cuda"), ("amd", "rocm"), ("amd-mi300x", "rocm"),
    ("cpu", "cpu"), ("x86", "cpu"), ("pool-a", None), ("nvidiax", None),
])
def test_hardware_kinds_choose_a_backend(kind: str, name: str | None) -> None:
    assert backends.backend_for_kind(kind) == name
    assert device_of_kind(kind) == (name or "cpu")  # an unclaimed kind is a pool label on the CPU


def test_a_registered_backend_claims_its_kinds(fake_registered: None) -> None:
    assert backends.backend_for_kind("fakeaccel-x1") == "fake"
    assert device_of_kind("fakeaccel") == "fake"
    assert resolve_device("fake") == "fake"


def test_worker_environment_pins_one_device(backend: DeviceBackend, tmp_path: Path) -> None:
    parent = {var: "0,1,2,3" for var in ALL_VISIBILITY} | {"TRITON_INTERPRET": "1", "PATH": "/bin"}
    env = child_environment(parent, scratch_dir=str(tmp_path), device=backend.name, cuda_visible_devices="2",
                            pythonpath="")
    if not backend.accelerated:
        assert env["TRITON_INTERPRET"] == "1" and env["CUDA_VISIBLE_DEVICES"] == ""
        return
    first, *others = backend.visibility_variables
    assert env[first] == "2"
    for var in others:  # a second variable would filter the already filtered list again
        assert var not in env
    if backend.torch_device_type == "cuda":
        assert "TRITON_INTERPRET" not in env


def test_visible_devices_reads_the_first_set_variable(backend: DeviceBackend) -> None:
    assert backend.visible_devices({}) is None
    if backend.visibility_variables:
        assert backend.visible_devices({backend.visibility_variables[-1]: "4,5"}) == "4,5"
        assert backend.visible_devices({v: str(i) for i, v in enumerate(backend.visibility_variables)}) == "0"


def test_peaks_for_the_roofline(backend: DeviceBackend) -> None:
    assert backend.peaks("Unknown Device 9000") is None
    if not backend.accelerated:
        assert backend.peaks(KNOWN_DEVICE["cuda"]) is None  # no roofline for interpreted runs
        return
    peaks = backend.peaks(KNOWN_DEVICE[backend.name])
    assert peaks is not None and peaks.name.upper() in KNOWN_DEVICE[backend.name].upper()
    assert 0 < peaks.gbps and 0 < peaks.fp32_gflops <= peaks.tensor_gflops
    assert peaks.flops_for(True) == peaks.tensor_gflops and peaks.flops_for(False) == peaks.fp32_gflops


@pytest.mark.parametrize(("device_name", "key"), [
    ("AMD Instinct MI250X", "MI250X"), ("AMD Instinct MI250", "MI250"), ("AMD Instinct MI300A", "MI300A"),
    ("AMD Instinct MI325X", "MI325X"), ("NVIDIA H200", "H200"), ("NVIDIA A100-SXM4-80GB", "A100"),
])
def test_peak_tables_match_the_longest_name(device_name: str, key: str) -> None:
    name = "rocm" if device_name.startswith("AMD") else "cuda"
    peaks = backends.get_backend(name).peaks(device_name)
    assert peaks is not None and peaks.name == key


def test_rocm_flushes_the_infinity_cache_too() -> None:
    assert flush_bytes_for("AMD Instinct MI300X") == 512 * 2**20  # 256 MB Infinity Cache behind L2
    assert flush_bytes_for("AMD Instinct MI250X") == 256 * 2**20  # L2 only: the CUDA default


def test_rocm_workers_keep_the_rocm_runtime_variables_but_no_secret(tmp_path: Path) -> None:
    parent = {"HSA_OVERRIDE_GFX_VERSION": "9.4.2", "AMD_LOG_LEVEL": "1", "HIP_API_KEY": "x", "ROCM_PATH": "/opt/rocm"}
    rocm = child_environment(parent, scratch_dir=str(tmp_path), device="rocm", cuda_visible_devices="1",
                             pythonpath="")
    assert rocm["HSA_OVERRIDE_GFX_VERSION"] == "9.4.2" and rocm["AMD_LOG_LEVEL"] == "1"
    assert rocm["ROCM_PATH"] == "/opt/rocm" and rocm["ROCR_VISIBLE_DEVICES"] == "1"
    assert "HIP_API_KEY" not in rocm
    cuda = child_environment(parent, scratch_dir=str(tmp_path), device="cuda", cuda_visible_devices="1",
                             pythonpath="")
    assert not any(k.startswith(("HSA_", "AMD_", "ROCM_")) for k in cuda)


class _Recording(FakeBackend):
    """The fake, writing down the order of the timing protocol's device calls."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def spin(self, cycles: int) -> None:
        self.calls.append("spin")

    def synchronize(self) -> None:
        self.calls.append("synchronize")

    def event_timer(self) -> EventTimer:
        calls, events = self.calls, super().event_timer()

        class Logged:
            def start(self) -> None:
                calls.append("start")
                events.start()

            def stop(self) -> None:
                calls.append("stop")
                events.stop()

            def elapsed_ms(self) -> float:
                calls.append("elapsed")
                return events.elapsed_ms()

        return Logged()


def test_the_timing_protocol_drives_the_backend_in_order() -> None:
    """Spin queued before the start event, the call between the events, a device-wide
    synchronize before the elapsed time is read (timing.py's protocol)."""
    rec = _Recording()
    timer = timing.Timer(torch.device("cpu"), rec)
    assert timer.cuda and timer.flushes
    timer.time_call(lambda: rec.calls.append("call"))
    assert rec.calls == ["spin", "start", "call", "stop", "synchronize", "elapsed"]
    mem = memory.JobMemory(torch.device("cpu"), rec)
    assert mem.report()["method"] == "fake max_memory_allocated"


def test_timing_functions_are_watched(backend: DeviceBackend) -> None:
    objs = backend.timer_objects()
    assert all(callable(o) for o in objs.values())
    if backend.torch_device_type == "cuda":
        assert "torch.cuda.Event.elapsed_time" in objs


def test_an_interpreted_backend_has_no_device_parts(backend: DeviceBackend) -> None:
    if backend.accelerated:
        pytest.skip("accelerated")
    device = backend.torch_device()
    with pytest.raises(NotImplementedError):
        backend.event_timer()
    assert backend.l2_flush_buffer(device) is None and backend.profiler_device() is None
    assert backend.mem_get_info(device) == (0, 0) and backend.max_memory_allocated(device) == 0


def test_fingerprint_names_the_device(backend: DeviceBackend) -> None:
    device = _device(backend) if backend.accelerated else backend.torch_device()
    fp = backend.fingerprint(device)
    assert fp["device_name"] and all(isinstance(v, str) for v in fp.values())


def test_unknown_and_absent_devices_are_refused(fake_registered: None) -> None:
    with pytest.raises(InvalidArgumentError):
        resolve_device("no-such-backend")
    if not backends.get_backend("rocm").available():
        with pytest.raises(InvalidArgumentError):
            resolve_device("rocm")


def test_a_factory_must_be_importable_by_a_worker() -> None:
    class Local(FakeBackend):
        pass

    with pytest.raises(InvalidArgumentError):
        backends.register_backend("local", Local)
    with pytest.raises(InvalidArgumentError):
        backends.register_backend("lambda", lambda: FakeBackend())


def test_an_installed_entry_point_registers_a_backend(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dist = tmp_path / "acme_backend-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-backend\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(
        f"[{backends.ENTRY_POINT_GROUP}]\nacme = tests.contracts.fake_device_backend:FakeBackend\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(registry, "_entry_points_loaded", False)
    try:
        assert "acme" in backends.names()
        assert isinstance(backends.get_backend("acme"), FakeBackend)
        assert backends.backend_for_kind("acme") == "acme"
    finally:
        backends.unregister_backend("acme")


# -- device parts (skipped where the device is absent) ------------------------------------------
def test_event_timer_times_a_spin(backend: DeviceBackend) -> None:
    if not backend.accelerated:
        pytest.skip("no device events")
    device = _device(backend)
    cycles = int(backend.spin_cycles_per_ms(device))
    assert cycles > 0
    events = backend.event_timer()
    events.start()
    backend.spin(cycles)
    events.stop()
    backend.synchronize()
    assert events.elapsed_ms() >= 0.0


def test_flush_buffer_lives_on_the_device(backend: DeviceBackend) -> None:
    if not backend.accelerated:
        pytest.skip("no cache to flush")
    device = _device(backend)
    buf = backend.l2_flush_buffer(device)
    assert buf is not None and buf.device.type == backend.torch_device_type
    buf.zero_()
    backend.synchronize()


def test_memory_reads_for_admission(backend: DeviceBackend) -> None:
    if not backend.accelerated:
        pytest.skip("no allocator to ask")
    device = _device(backend)
    free, total = backend.mem_get_info(device)
    assert 0 < free <= total
    assert backend.device_count() >= 1
    backend.reset_peak_memory(device)
    before = backend.memory_allocated(device)
    x = torch.empty(2**20, dtype=torch.uint8, device=device)
    assert backend.max_memory_allocated(device) >= backend.memory_allocated(device) >= before
    del x
    backend.empty_cache()
    assert backend.memory_reserved(device) >= backend.memory_allocated(device)


# -- a judged evaluation through a backend from outside the package ------------------------------
def test_a_judged_evaluation_runs_through_a_registered_backend(fake_registered: None, tmp_path: Path) -> None:
    opts = EvalOptions(device="fake", correctness_trials=2, compile_timeout_s=120.0, run_timeout_s=120.0,
                       timing=TimingOptions(min_trials=3, max_trials=3, input_sets=1),
                       pool=WorkerPoolOptions(spare_worker=False), scratch_dir=tmp_path / "scratch")
    with Judge(opts) as judge:
        assert judge.backend.name == "fake" and judge.opts.sandbox.cuda_visible_devices == "0"
        v = judge.evaluate(SPEC, TRITON.format(factor=2.0), candidate_id="through-fake")
    assert v.status == "correct", v.reason
    # The worker built the fake from its import path and was pinned through its variable.
    assert v.fingerprint["backend"] == "fake" and v.fingerprint["device_name"] == FAKE_DEVICE_NAME
    assert v.fingerprint["visible"] == "0"
    # Timing took the accelerated path: the fake's events, its flush, its peaks.
    assert v.evidence["timing"]["clock"] == FakeBackend.clock and v.evidence["timing"]["l2_flush"] is True
    assert not v.interpreted and v.candidate_timing is not None and v.candidate_timing.trials == 3
    assert v.diagnosis is not None and v.diagnosis.roofline_fraction > 0
    assert not any("no peak table entry" in n for n in v.diagnosis.notes)
