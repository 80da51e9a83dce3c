"""The arithmetic audit (worker/arithmetic_audit.py, README "Library calls"): what a
candidate's Triton launch writes, against what it was given. Kernels run in-process in
Triton's interpreter; the judged cheats (copy, add-zero, transpose, decoy + copy) are in
test_adversarial.py."""

from __future__ import annotations

import types
from pathlib import Path

import pytest
import torch

from ke_evaluator.worker import arithmetic_audit, launch_counter
from tests.kernel_files import import_source

KERNELS = '''
import triton
import triton.language as tl


@triton.jit
def copy_rows(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=mask), mask=mask)


@triton.jit
def every_other(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst_ptr + offs, tl.load(src_ptr + 2 * offs, mask=mask), mask=mask)


@triton.jit
def pair_max(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    a = tl.load(src_ptr + 2 * offs, mask=mask)
    b = tl.load(src_ptr + 2 * offs + 1, mask=mask)
    tl.store(dst_ptr + offs, tl.maximum(a, b), mask=mask)


@triton.jit
def _pick(a, b):
    return tl.where(a > b, a, b)


@triton.jit
def pair_max_helper(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    a = tl.load(src_ptr + 2 * offs, mask=mask)
    b = tl.load(src_ptr + 2 * offs + 1, mask=mask)
    tl.store(dst_ptr + offs, _pick(a, b), mask=mask)


@triton.jit
def scale_in_place(x_ptr, n, factor, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=mask) * factor, mask=mask)


@triton.jit
def relu_out(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst_ptr + offs, tl.maximum(tl.load(src_ptr + offs, mask=mask), 0.0), mask=mask)


@triton.jit
def argmax_pairs(src_ptr, idx_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    a = tl.load(src_ptr + 2 * offs, mask=mask)
    b = tl.load(src_ptr + 2 * offs + 1, mask=mask)
    tl.store(idx_ptr + offs, tl.where(b > a, 1, 0).to(tl.int64) + 2 * offs, mask=mask)
'''


@pytest.fixture(scope="module")
def kernels(tmp_path_factory: pytest.TempPathFactory) -> types.ModuleType:
    module = import_source(Path(tmp_path_factory.mktemp("audit")), "audit_kernels", KERNELS)
    launch_counter.install()
    return module


@pytest.fixture(autouse=True, params=["whole", "pieces"])
def analysis(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every decision below twice: written values analysed in one piece, and piece by piece
    (what a large write gets: chunked hash, counts, sampled search), with tiny pieces."""
    if request.param == "pieces":
        monkeypatch.setattr(arithmetic_audit, "EXACT_ELEMENTS", 0)
        monkeypatch.setattr(arithmetic_audit, "CHUNK", 16)
        monkeypatch.setattr(arithmetic_audit, "SAMPLE", 8)
    return str(request.param)


def _audit(kernels: types.ModuleType, run) -> list[arithmetic_audit.LaunchAudit]:  # noqa: ANN001
    audit = arithmetic_audit.ArithmeticAudit()
    with launch_counter.recording(launch_counter.LaunchRecorder(module_name=kernels.__name__, audit=audit)):
        run()
    return audit.launches


def test_a_copy_is_a_move_even_into_memory_that_already_holds_the_result(kernels: types.ModuleType) -> None:
    src = torch.randn(64)
    dst = src.clone()  # stale memory with this very result: the write changes nothing visible
    (launch,) = _audit(kernels, lambda: kernels.copy_rows[(1,)](src, dst, 64, BLOCK=64))
    assert not launch.computes and "values are those of argument #0" in launch.describe()


def test_a_slice_is_a_gather_and_a_pairwise_max_selects(kernels: types.ModuleType) -> None:
    src, dst = torch.randn(128), torch.empty(64)
    (gather,) = _audit(kernels, lambda: kernels.every_other[(1,)](src, dst, 64, BLOCK=64))
    assert not gather.computes and "one of its inputs' values" in gather.describe()
    # a max-pool also writes only input values, but compares them: arithmetic of the operator
    for kernel in (kernels.pair_max, kernels.pair_max_helper):
        (pool,) = _audit(kernels, lambda kernel=kernel: kernel[(1,)](src, dst, 64, BLOCK=64))
        assert pool.computes and "selects" in pool.describe()
        torch.testing.assert_close(dst, src.view(64, 2).amax(dim=1))
    assert not arithmetic_audit.kernel_selects(kernels.every_other.fn)
    assert arithmetic_audit.kernel_selects(kernels.pair_max_helper.fn)  # through the @triton.jit helper


def test_identity_arithmetic_in_place_is_a_move_and_a_real_scale_computes(kernels: types.ModuleType) -> None:
    x = torch.randn(64)
    (same,) = _audit(kernels, lambda: kernels.scale_in_place[(1,)](x, 64, 1.0, BLOCK=64))
    assert not same.computes  # nothing changed, nothing written that was not there
    (ulp,) = _audit(kernels, lambda: kernels.scale_in_place[(1,)](x, 64, 1.0 + 2**-23, BLOCK=64))
    assert not ulp.computes and "in place" in ulp.describe()
    before = x.clone()
    (real,) = _audit(kernels, lambda: kernels.scale_in_place[(1,)](x, 64, 0.5, BLOCK=64))
    assert real.computes
    torch.testing.assert_close(x, before * 0.5)  # the audited launch ran for real, once


def test_a_relu_into_zero_pages_computes(kernels: types.ModuleType) -> None:
    src, dst = torch.randn(64), torch.zeros(64)  # its zeros are written where they already are
    (relu,) = _audit(kernels, lambda: kernels.relu_out[(1,)](src, dst, 64, BLOCK=64))
    assert relu.computes
    (write,) = relu.writes
    assert bool(write.mask.all())  # every position counts as written, the zeros too
    torch.testing.assert_close(dst, src.clamp_min(0))


def test_integer_outputs_and_the_counterfactual_keeps_indices_in_range(kernels: types.ModuleType) -> None:
    src, idx = torch.randn(128), torch.empty(64, dtype=torch.int64)
    launches = _audit(kernels, lambda: kernels.argmax_pairs[(1,)](src, idx, 64, BLOCK=64))
    assert launches[0].computes
    expected = idx.clone()
    replay = arithmetic_audit.ArithmeticAudit(plan=launches)
    with launch_counter.recording(launch_counter.LaunchRecorder(module_name=kernels.__name__, audit=replay)):
        kernels.argmax_pairs[(1,)](src, idx, 64, BLOCK=64)
    assert not torch.equal(idx, expected)  # the computed values were replaced ...
    assert sorted(idx.tolist()) == sorted(expected.tolist())  # ... by its own values: valid indices


def _python_launch(body):  # noqa: ANN001, ANN202
    """A stand-in for ``JITFunction.run`` (the audit's bookkeeping, not Triton, is under test)."""
    calls: list[int] = []

    def orig(fn_obj, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        calls.append(1)
        body(*args)

    return orig, calls


def test_a_tensor_descriptor_is_analysed_through_its_base() -> None:
    from triton.tools.tensor_descriptor import TensorDescriptor

    src, dst = torch.randn(4, 8), torch.zeros(4, 8)
    desc = TensorDescriptor.from_tensor(dst, [2, 8])
    orig, calls = _python_launch(lambda s, d: d.base.copy_(s))
    audit = arithmetic_audit.ArithmeticAudit()
    audit.on_launch(None, orig, (src, desc), {}, "tma_copy", False)
    (launch,) = audit.launches
    assert not launch.computes and "values are those of argument #0" in launch.describe()
    assert torch.equal(dst, src) and len(calls) > 1  # the reruns wrote copies, not dst
    orig, _ = _python_launch(lambda s, d: d.base.copy_(s.exp()))
    dst.zero_()
    audit.on_launch(None, orig, (src, desc), {}, "tma_exp", False)
    assert audit.launches[1].computes
    torch.testing.assert_close(dst, src.exp())


def test_memory_reached_otherwise_is_no_evidence_of_arithmetic() -> None:
    class Handle:  # an object that hands the kernel an address
        def __init__(self, t: torch.Tensor) -> None:
            self.t = t

        def data_ptr(self) -> int:
            return self.t.data_ptr()

    src, dst = torch.randn(8), torch.zeros(8)
    orig, calls = _python_launch(lambda s, d: d.t.copy_(s.exp()))
    audit = arithmetic_audit.ArithmeticAudit()
    audit.on_launch(None, orig, (src, Handle(dst)), {}, "opaque", False)
    (launch,) = audit.launches
    assert launch.opaque and not launch.computes and len(calls) == 1  # run once, for real
    torch.testing.assert_close(dst, src.exp())


def _economical(kernels: types.ModuleType, economy: arithmetic_audit.Economy | None, src: torch.Tensor,
                out: list[torch.Tensor]) -> arithmetic_audit.ArithmeticAudit:
    """A move, two computing launches, a move, under ``economy``."""
    audit = arithmetic_audit.ArithmeticAudit(economy=economy)
    with launch_counter.recording(launch_counter.LaunchRecorder(module_name=kernels.__name__, audit=audit)):
        kernels.copy_rows[(1,)](src, out[0], 64, BLOCK=64)
        kernels.relu_out[(1,)](out[0], out[1], 64, BLOCK=64)
        kernels.scale_in_place[(1,)](out[1], 64, 0.5, BLOCK=64)
        kernels.copy_rows[(1,)](out[1], out[2], 64, BLOCK=64)
    return audit


@pytest.mark.parametrize(("economy", "skipped"), [
    (None, [False] * 4),  # the full audit
    (arithmetic_audit.Economy(computing=1), [False, False, True, True]),
    (arithmetic_audit.Economy(computing=2), [False, False, False, True]),
    (arithmetic_audit.Economy(computing=3), [False] * 4),  # never enough: the pass is the full audit
    # a budget of 0 bytes: the first computing launch is enough, whatever ``computing`` asks
    (arithmetic_audit.Economy(computing=3, budget_bytes=0), [False, False, True, True]),
    # a budget larger than the pass: ``computing`` decides
    (arithmetic_audit.Economy(computing=2, budget_bytes=1 << 40), [False, False, False, True]),
])
def test_an_economical_pass_analyses_until_it_has_computing_launches(
        kernels: types.ModuleType, economy: arithmetic_audit.Economy | None, skipped: list[bool]) -> None:
    src = torch.randn(64)
    out = [torch.empty(64) for _ in range(3)]
    audit = _economical(kernels, economy, src, out)
    assert [la.skipped for la in audit.launches] == skipped
    assert audit.complete == (not any(skipped))
    # a move alone is no evidence: the pass goes on past it
    assert not audit.launches[0].computes and audit.launches[1].computes
    assert all(not la.writes and "not analysed" in la.describe() for la in audit.launches if la.skipped)
    storage_bytes = [2 * 256, 2 * 256, 256, 2 * 256]  # each launch's tensor arguments
    assert audit.analysed_bytes == sum(b for b, skip in zip(storage_bytes, skipped, strict=True) if not skip)
    torch.testing.assert_close(out[2], out[1])  # the last launch ran, once, on what came before
    # an economical pass replaces what it found computed as it goes (its output is the
    # counterfactual); the full audit leaves every value as the kernels wrote it
    assert audit.replaced == (economy is not None)
    assert torch.allclose(out[2], src.clamp_min(0) * 0.5) == (economy is None)


def test_the_counterfactual_of_an_economical_pass_replaces_only_what_it_analysed(kernels: types.ModuleType) -> None:
    src = torch.randn(64)
    out = [torch.empty(64) for _ in range(3)]
    audit = _economical(kernels, arithmetic_audit.Economy(computing=1), src, out)
    replay = arithmetic_audit.ArithmeticAudit.counterfactual(audit.launches)
    again = [torch.empty(64) for _ in range(3)]
    with launch_counter.recording(launch_counter.LaunchRecorder(module_name=kernels.__name__, audit=replay)):
        kernels.copy_rows[(1,)](src, again[0], 64, BLOCK=64)
        kernels.relu_out[(1,)](again[0], again[1], 64, BLOCK=64)
        replaced = again[1].clone()
        kernels.scale_in_place[(1,)](again[1], 64, 0.5, BLOCK=64)  # skipped: runs on the replaced values
        kernels.copy_rows[(1,)](again[1], again[2], 64, BLOCK=64)
    assert not torch.equal(replaced, src.clamp_min(0))
    torch.testing.assert_close(again[2], replaced * 0.5)
