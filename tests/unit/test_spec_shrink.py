"""kernelevolve.spec_shrink: finding a spec's size constants, rewriting them, and fitting
odd specs to the CPU interpreter's budget (measured on the meta device in a child)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from kernelevolve.errors import InvalidSpecError
from kernelevolve.spec_shrink import ShrinkBudget, SpecShrinkError, fit_for_interpreter, rewrite, size_constants
from tests.conftest import REPO_ROOT

LARGE = REPO_ROOT / "examples" / "large"

# sizes in __init__ (through get_init_inputs), a size derived from another, a tuple
# assignment, and non-size constants (eps, dropout p, kernel size, a dim index) to keep.
ODD = '''"""Odd spec."""
import torch
import torch.nn as nn

batch_size, seq = 8192, 4096
hidden: int = 2048
inner = 4 * hidden
eps = 1e-5
p = 0.1
kernel_size = 3
dim = -1
use_bias = True


class Model(nn.Module):
    def __init__(self, hidden, inner, eps, p, kernel_size):
        super().__init__()
        self.up = nn.Linear(hidden, inner)
        self.down = nn.Linear(inner, hidden)
        self.norm = nn.LayerNorm(hidden, eps=eps)
        self.drop = nn.Dropout(p)
        self.conv = nn.Conv1d(hidden, hidden, kernel_size, padding=kernel_size // 2, groups=hidden)

    def forward(self, x):
        y = self.conv(x.transpose(1, 2)).transpose(1, 2)
        return self.norm(x + self.down(torch.relu(self.up(self.drop(y)))))


def get_inputs():
    return [torch.randn(batch_size // 1024, seq, hidden)]


def get_init_inputs():
    return [hidden, inner, eps, p, kernel_size]
'''

NO_CONSTANTS = '''"""A real-size spec with its sizes written inline."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(65536, 16384)]


def get_init_inputs():
    return []
'''

CPU_DECLARED = NO_CONSTANTS + '''

def get_cpu_inputs():
    return [torch.randn(64, 512)]
'''

DIVISIBLE = '''"""Heads must divide the width: halving width below heads * 8 breaks the view."""
import torch
import torch.nn as nn

tokens = 1048576
width = 512
n_heads = 8


class Model(nn.Module):
    def __init__(self, n_heads):
        super().__init__()
        self.n_heads = n_heads

    def forward(self, x):
        b, d = x.shape
        y = x.view(b, self.n_heads, d // self.n_heads)
        return torch.softmax(y, dim=-1).reshape(b, d)


def get_inputs():
    return [torch.randn(tokens, width)]


def get_init_inputs():
    return [n_heads]
'''


def test_size_constants_are_the_integer_sizes_only() -> None:
    found = {c.name: c.value for c in size_constants(ODD)}
    assert found == {"batch_size": 8192, "seq": 4096, "hidden": 2048}  # inner is derived; eps, p, ... kept


def test_rewrite_changes_only_the_given_literals_and_keeps_the_rest() -> None:
    consts = size_constants(ODD)
    out = rewrite(ODD, consts, {"batch_size": 64, "hidden": 128})
    assert "batch_size, seq = 64, 4096" in out and "hidden: int = 128" in out and "inner = 4 * hidden" in out
    assert out.replace("64, 4096", "8192, 4096").replace("int = 128", "int = 2048") == ODD
    ast.parse(out)


def test_a_name_assigned_twice_is_not_shrunk() -> None:
    assert [c.name for c in size_constants("n = 4096\nn = 8192\nm = 1024\n")] == ["m"]


def test_odd_spec_is_shrunk_below_budget_with_its_non_size_constants_untouched() -> None:
    fit = fit_for_interpreter(ODD)
    assert fit.method == "constants" and fit.shrunk
    assert fit.original_inputs[0].shape == [8, 4096, 2048]
    assert fit.input_bytes <= ShrinkBudget().input_bytes < fit.original_input_bytes
    assert set(fit.changed) <= {"batch_size", "seq", "hidden"} and fit.changed
    tree = {n.targets[0].id: n.value for n in ast.parse(fit.source).body
            if isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Name)}
    for name, value in (("eps", 1e-5), ("p", 0.1), ("kernel_size", 3), ("use_bias", True)):
        assert ast.literal_eval(tree[name]) == value
    assert ast.unparse(tree["dim"]) == "-1" and ast.unparse(tree["inner"]) == "4 * hidden"
    text = fit.describe()
    assert text.startswith("judged at shrunk shapes: x [") and "instead of [8, 4096, 2048]" in text


def test_a_spec_that_fits_is_judged_as_it_is() -> None:
    fit = fit_for_interpreter(NO_CONSTANTS.replace("65536, 16384", "64, 512"))
    assert fit.method == "as_is" and not fit.shrunk and fit.inputs[0].shape == [64, 512]
    assert fit.describe() == "judged at the spec's own shapes"


def test_a_spec_without_constants_is_shrunk_by_its_input_sizes() -> None:
    """Sizes written inline: the inputs' own sizes are halved where get_inputs() makes them
    (nothing made at 4 GiB), the forward re-traced on meta tensors at each step."""
    fit = fit_for_interpreter(NO_CONSTANTS)
    assert fit.method == "inputs" and fit.input_bytes <= ShrinkBudget().input_bytes
    assert fit.original_inputs[0].shape == [65536, 16384] and fit.inputs[0].shape != [65536, 16384]
    assert fit.describe().startswith("judged at shrunk shapes: x [")
    assert "re-traced: same ops, same parameter shapes" in fit.describe()


# A deep CNN at 160x160 with its sizes inline (no constants, no get_cpu_inputs()): too many
# FLOPs for the interpreter. Its head follows a global average, so any image size keeps the
# model; the labels' batch follows the images'.
DEEP_CNN = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, width, depth, classes):
        super().__init__()
        layers = [nn.Conv2d(3, width, 3, padding=1), nn.ReLU()]
        for _ in range(depth):
            layers += [nn.Conv2d(width, width, 3, padding=1), nn.BatchNorm2d(width), nn.ReLU()]
        self.body = nn.Sequential(*layers)
        self.head = nn.Linear(width * POOLED * POOLED, classes)
        self.pool = POOL

    def forward(self, x, labels):
        h = torch.flatten(self.pool(self.body(x)), 1)
        return nn.functional.cross_entropy(self.head(h), labels)


def get_inputs():
    return [torch.randn(12, 3, 160, 160), torch.randint(0, 10, (12,))]


def get_init_inputs():
    return [16, 50, 10]
'''
GLOBAL_AVERAGE = DEEP_CNN.replace("POOLED", "1").replace("POOL", "nn.AdaptiveAvgPool2d(1)")
# ... and one whose head reads a flattened 20x20 map: its width follows the image size.
FLATTENED = DEEP_CNN.replace("POOLED", "20").replace("POOL", "nn.MaxPool2d(8)")


def test_a_deep_cnn_without_constants_is_judged_at_smaller_batch_and_image_sizes() -> None:
    fit = fit_for_interpreter(GLOBAL_AVERAGE)
    assert fit.method == "inputs"
    (x, labels), (x0, labels0) = fit.inputs, fit.original_inputs
    assert x0.shape == [12, 3, 160, 160] and labels0.shape == [12]
    assert x.shape is not None and labels.shape == [x.shape[0]] and x.shape[1] == 3  # channels kept
    assert x.shape[2] == x.shape[3] < 160 and labels.dtype == "int64"
    assert fit.describe().startswith("judged at shrunk shapes: x [")


def test_a_shrink_that_changes_the_model_is_refused_as_a_limit_of_ours() -> None:
    """Halving the image changes the flattened width the head reads: another model. The
    batch alone does not fit: a resource limit (exit 3), naming the limits and settings."""
    from kernelevolve.errors import InvalidSpecError, ResourceLimitError

    with pytest.raises(SpecShrinkError, match=r"too large for the CPU interpreter .*GFLOP per forward.*"
                       r"evaluator.interpreter_max_flops.*keeps its graph") as info:
        fit_for_interpreter(FLATTENED)
    assert isinstance(info.value, ResourceLimitError) and not isinstance(info.value, InvalidSpecError)
    assert "\n" not in str(info.value)


def test_declared_cpu_inputs_are_used() -> None:
    fit = fit_for_interpreter(CPU_DECLARED)
    assert fit.method == "get_cpu_inputs" and fit.inputs[0].shape == [64, 512]
    assert "the spec's get_cpu_inputs()" in fit.describe()


def test_a_halving_that_breaks_the_reference_is_not_taken() -> None:
    fit = fit_for_interpreter(DIVISIBLE, ShrinkBudget(input_bytes=2**16))
    shape = fit.inputs[0].shape
    assert shape is not None and shape[1] % 8 == 0 and "n_heads" not in fit.changed  # structural: never halved
    assert fit.input_bytes <= 2**16


def test_a_spec_whose_reference_fails_is_a_spec_error() -> None:
    with pytest.raises(InvalidSpecError, match="could not be sized on the meta device"):
        fit_for_interpreter(NO_CONSTANTS.replace("torch.softmax(x, dim=-1)", "x @ torch.ones(3, 3)")
                            .replace("65536, 16384", "64, 512"))


# examples/large: every spec parses and keeps its sizes in module-level constants, so a CPU
# session can shrink it; none is run here at its real size (4-12 GB of inputs).
@pytest.mark.parametrize("path", sorted(LARGE.glob("*.py")), ids=lambda p: p.stem)
def test_large_examples_have_size_constants(path: Path) -> None:
    source = path.read_text()
    names = {n.name for n in ast.parse(source).body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
    assert {"Model", "get_inputs", "get_init_inputs"} <= names
    assert size_constants(source)


# Each spec of examples/large fits the interpreter's budget by its own constants, and its
# shrunk reference runs (measured on meta tensors first: nothing is allocated at real size).
# About 5.5 min for all 17 on 2 shared cores, 1.5 of it the LSTM stepping through time on meta.
@pytest.mark.slow
@pytest.mark.parametrize("path", sorted(LARGE.glob("*.py")), ids=lambda p: p.stem)
def test_every_large_example_shrinks_to_the_budget(path: Path) -> None:
    fit = fit_for_interpreter(path.read_text())
    assert fit.method == "constants" and fit.changed
    assert fit.input_bytes <= ShrinkBudget().input_bytes
    assert fit.describe().startswith("judged at shrunk shapes: ")


def test_a_spec_whose_import_never_returns_is_a_spec_error_at_the_import_limit() -> None:
    import time

    from kernelevolve.spec_shrink import FitProbe

    hangs = "import threading\nthreading.Event().wait()\n" + NO_CONSTANTS
    t0 = time.monotonic()
    with pytest.raises(InvalidSpecError, match=r"import did not return within 2 s \(evaluator.spec_import_timeout_s"):
        FitProbe(hangs, import_timeout_s=2.0).result(timeout_s=120.0)
    assert time.monotonic() - t0 < 60.0  # the child's torch import and the limit, not result's 120 s
