"""The arithmetic audit on bool and integer writes, in-process (Triton's interpreter), and
the pieces of the evaluator's own verdicts that need no judge: the counterfactual's
replacements, the off-identity inputs, the view-only spec test. Judged end to end in
test_own_verdicts.py."""

from __future__ import annotations

import types
from pathlib import Path

import pytest
import torch

from ke_evaluator.worker import arithmetic_audit, launch_counter
from ke_evaluator.worker.defenses import _spread
from ke_evaluator.worker.spec_validation import only_views
from tests.kernel_files import import_source

# every decision in one piece and piece by piece (what a large write gets): autouse there
from .test_library_teeth import analysis  # noqa: F401

KERNELS = '''
import triton
import triton.language as tl


@triton.jit
def greater(a_ptr, b_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(a_ptr + offs, mask=mask) > tl.load(b_ptr + offs, mask=mask), mask=mask)


@triton.jit
def copy_any(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=mask).to(dst_ptr.dtype.element_ty), mask=mask)
'''


@pytest.fixture(scope="module")
def kernels(tmp_path_factory: pytest.TempPathFactory) -> types.ModuleType:
    module = import_source(Path(tmp_path_factory.mktemp("audit_outputs")), "audit_output_kernels", KERNELS)
    launch_counter.install()
    return module


def _audit(kernels: types.ModuleType, run) -> arithmetic_audit.LaunchAudit:  # noqa: ANN001
    audit = arithmetic_audit.ArithmeticAudit()
    with launch_counter.recording(launch_counter.LaunchRecorder(module_name=kernels.__name__, audit=audit)):
        run()
    (launch,) = audit.launches
    return launch


@pytest.mark.parametrize("n", [1, 7, 33, 1000])
def test_a_comparison_writing_bool_computes_even_into_memory_holding_its_answer(kernels: types.ModuleType,
                                                                                 n: int) -> None:
    a, b = torch.randn(n), torch.randn(n)
    block = max(16, 1 << (n - 1).bit_length())
    for held in (None, True):  # fresh memory; memory that already holds the answer
        y = torch.zeros(n, dtype=torch.bool) if held is None else (a > b)
        launch = _audit(kernels, lambda y=y: kernels.greater[(1,)](a, b, y, n, BLOCK=block))
        assert launch.computes and "comparison results" in launch.describe(), launch.describe()
        assert torch.equal(y, a > b)


@pytest.mark.parametrize("source", ["bool", "zero_one_float"])
def test_a_bool_copied_or_cast_from_zeros_and_ones_is_a_move(kernels: types.ModuleType, source: str) -> None:
    """A library's comparison result copied (or its 0.0/1.0 form cast) by a kernel: a copy."""
    x = torch.randn(33)
    src = (x > 0) if source == "bool" else (x > 0).float()
    y = torch.empty(33, dtype=torch.bool)
    launch = _audit(kernels, lambda: kernels.copy_any[(1,)](src, y, 33, BLOCK=64))
    assert not launch.computes and "values are those of argument #0" in launch.describe(), launch.describe()
    # a float source that is no bool in disguise: its cast to bool ("nonzero") is no copy
    z = torch.rand(33) + 0.5
    y2 = torch.empty(33, dtype=torch.bool)
    cast = _audit(kernels, lambda: kernels.copy_any[(1,)](z, y2, 33, BLOCK=64))
    assert cast.computes


@pytest.mark.parametrize("values", [[5], [3, 3, 3], [0], [0, 0], [2, 7, 7, 1]])
def test_integer_replacements_differ_everywhere_and_stay_near_their_own_values(values: list[int]) -> None:
    t = torch.tensor(values)
    fill = arithmetic_audit.random_fill(t)
    assert fill.dtype == t.dtype and bool((fill != t).all())
    assert int(fill.min()) >= max(0, int(t.min()) - 1) and int(fill.max()) <= int(t.max()) + 1


def test_bool_replacements_are_the_negation() -> None:
    t = torch.tensor([True, False, False])
    assert torch.equal(arithmetic_audit.random_fill(t), ~t)


def test_the_off_identity_inputs_spread_floats_and_keep_the_rest() -> None:
    x = torch.rand(7, 33)
    idx = torch.arange(5)
    moved = _spread([x, idx, torch.tensor([0.25])], 2.0)
    assert moved is not None
    assert float(moved[0].min()) == pytest.approx(-2.0) and float(moved[0].max()) == pytest.approx(2.0)
    assert torch.equal(moved[1], idx)
    assert float(moved[2]) == pytest.approx(-2.25)  # one value: to the other side of 0
    assert torch.equal(x, x.clone())  # the given inputs are untouched
    assert _spread([idx], 2.0) is None


class _Views(torch.nn.Module):
    def __init__(self, how: str) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(4, 3))
        self.how = how

    def forward(self, x: torch.Tensor) -> object:
        if self.how == "weight":
            return self.w.t()
        if self.how == "mixed":
            return x.view(-1), x * 2
        if self.how == "copy":
            return x.t().contiguous()
        return torch.split(x, 2, dim=1)


@pytest.mark.parametrize(("how", "nothing"), [("weight", True), ("split", True), ("mixed", False), ("copy", False)])
def test_only_views_of_inputs_or_parameters_have_nothing_to_compute(how: str, nothing: bool) -> None:
    x = torch.randn(3, 5)
    model = _Views(how)
    out = model(x)
    assert bool(only_views(out, [x], model)) == nothing
