"""Differential fuzzing of the offline synthesizer (tests/synthesizer/fuzz): random small
graphs lowered at their seed genome and at a random genome, checked against their reference
in one child interpreter; and every saved regression spec (tests/synthesizer/regressions)
checked at its seed genome and at every row strategy it offers.

Run more cases from the command line: ``python -m tests.synthesizer.fuzz --start S --count N``
(``--save`` writes failing cases to tests/synthesizer/regressions/)."""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

import pytest

from ke_synthesizer.offline import OfflineSynthesizer
from ke_synthesizer.offline.check import run_in_subprocess

from .conftest import batched_seed_results
from .fuzz.generator import TOLERANCES, generate, validate
from .fuzz.runner import REGRESSIONS_DIR, Failure, FuzzReport, run_cases, save_regression

log = logging.getLogger(__name__)
REGRESSIONS = sorted(p.stem for p in REGRESSIONS_DIR.glob("*.py"))
# a regression spec whose bug is not fixed yet says why in a FUZZ_XFAIL = "..." line
_XFAIL = re.compile(r'^FUZZ_XFAIL = "(.*)"$', re.M)
SHORT_SEEDS = range(0, 30)  # 60 candidates in one child interpreter: ~40 s of CPU on the 2-core machine
LONG_SEEDS = range(10_000, 10_300)  # ~5 min of CPU: inside the 600 s test timeout


def _regression_params() -> list[Any]:
    params = []
    for name in REGRESSIONS:
        why = _XFAIL.search((REGRESSIONS_DIR / f"{name}.py").read_text())
        marks = [pytest.mark.xfail(strict=True, reason=why.group(1))] if why else []
        params.append(pytest.param(name, marks=marks, id=name))
    return params


def _assert_clean(report: FuzzReport, seeds: range) -> None:
    log.info("fuzz seeds %d..%d: %s", seeds.start, seeds.stop - 1, report.summary())
    assert report.cases == len(seeds) and report.invalid == 0, report.summary()
    assert report.candidates == 2 * len(seeds), report.summary()
    # a case may become library calls, but the fuzzer must mostly exercise generated kernels
    assert report.full + report.partial > report.candidates // 2, report.summary()
    lines = [f"{f.case.name} {f.genome or 'seed'}: {f.reason[:300]}" for f in report.failures]
    assert not report.failures, report.summary() + "\n" + "\n".join(lines)


def test_generator_is_deterministic_and_valid() -> None:
    for seed in range(0, 200):
        case = generate(seed)
        assert generate(seed).source == case.source
        assert validate(case) == "", (seed, validate(case))
        assert case.dtype in TOLERANCES
    drawn = {step for seed in range(0, 200) for step in generate(seed).steps}
    for kind in ("sum_keep", "mean", "amax_keep", "var", "kept_plus_bias", "broadcast_back", "permute",
                 "softmax", "layer_norm", "group_norm", "batch_norm", "instance_norm", "linear", "conv2d"):
        assert kind in drawn, kind


def test_fuzz_short_run(synth: OfflineSynthesizer) -> None:
    _assert_clean(run_cases(synth, SHORT_SEEDS, genomes=True), SHORT_SEEDS)


@pytest.mark.slow
def test_fuzz_long_run(synth: OfflineSynthesizer) -> None:
    _assert_clean(run_cases(synth, LONG_SEEDS, genomes=True), LONG_SEEDS)


def test_save_regression_writes_a_runnable_spec(tmp_path: Path) -> None:
    case = generate(7)
    path = save_regression(Failure(case, {"g0.BLOCK_N": "64"}, "mismatch: max_abs_error 3.5"), tmp_path)
    text = path.read_text()
    assert path.name == "fuzz_7.py" and "mismatch: max_abs_error 3.5" in text and "g0.BLOCK_N" in text
    scope: dict[str, Any] = {}
    exec(compile(text, str(path), "exec"), scope)  # noqa: S102 - the file just written
    assert scope["Model"]()(*scope["get_inputs"]()).shape == scope["Model"]()(*scope["get_inputs"]()).shape


@pytest.fixture(scope="module")
def regression_results(synth: OfflineSynthesizer) -> dict[str, dict[str, Any]]:
    return batched_seed_results(synth, REGRESSIONS_DIR, REGRESSIONS)


@pytest.mark.parametrize("name", _regression_params())
def test_regression_spec_seed(name: str, regression_results: dict[str, dict[str, Any]]) -> None:
    result = regression_results[name]
    bad = [t for t in result["trials"] if not t["ok"]]
    assert result["ok"] and not result["error"] and not bad, result["error"] or bad


@pytest.fixture(scope="module")
def regression_strategy_results(synth: OfflineSynthesizer) -> dict[str, list[dict[str, Any]]]:
    """Every regression spec at every row strategy its space offers (one knob changed)."""
    jobs, owner = [], {}
    for name in REGRESSIONS:
        src = (REGRESSIONS_DIR / f"{name}.py").read_text()
        spec = synth._capture(src, name)
        for key, choices in synth.space(src, name):
            if not key.endswith(".strategy"):
                continue
            for choice in choices:
                source, _full, _fb = synth.lower(spec, {key: choice})
                jid = f"{name}:{key}={choice}"
                owner[jid] = name
                jobs.append({"id": jid, "spec_source": src, "candidate_source": source, "seeds": [1]})
    by_name: dict[str, list[dict[str, Any]]] = {n: [] for n in REGRESSIONS}
    for r in run_in_subprocess(jobs) if jobs else []:
        by_name[owner[r["id"]]].append(r)
    return by_name


@pytest.mark.parametrize("name", _regression_params())
def test_regression_spec_every_row_strategy(name: str,
                                            regression_strategy_results: dict[str, list[dict[str, Any]]]) -> None:
    bad = [(r["id"], r["error"][-300:] or r["trials"]) for r in regression_strategy_results[name] if not r["ok"]]
    assert not bad, bad


def _cross_entropy_spec(opts: str, module: bool) -> str:
    call = (f"self.loss = nn.CrossEntropyLoss({opts})", "self.loss(logits, target)") if module else \
        ("pass", f"F.cross_entropy(logits, target, {opts})")
    weight = 'self.register_buffer("w", torch.rand(11) + 0.5)' if "self.w" in opts else "pass"
    return "\n".join([
        '"""Cross-entropy with options."""', "import torch", "import torch.nn as nn",
        "import torch.nn.functional as F", "", "", "class Model(nn.Module):", "    def __init__(self):",
        "        super().__init__()", f"        {weight}", f"        {call[0]}", "",
        "    def forward(self, logits, target):", f"        return {call[1]}", "", "",
        "def get_inputs():", "    return [torch.randn(13, 11), torch.randint(0, 11, (13,))]", "", "",
        "def get_init_inputs():", "    return []", "", "",
        "def get_extra_inputs():",
        "    return [[torch.randn(5, 11), torch.tensor([3, 1, 3, 10, 0])], [torch.randn(1, 11), torch.tensor([3])]]",
        ""])


CROSS_ENTROPY_OPTIONS = [
    ("weight=self.w", False),
    ("weight=self.w, label_smoothing=0.1, ignore_index=3", False),
    ("weight=self.w, label_smoothing=0.3, reduction='sum'", False),
    ("label_smoothing=0.2, ignore_index=3, reduction='none'", False),
    ("weight=self.w, ignore_index=3, reduction='none'", False),
    ("weight=torch.linspace(0.5, 2.0, 11), label_smoothing=0.25, reduction='sum'", True),
    ("label_smoothing=0.1, ignore_index=1", True),
]


def test_cross_entropy_options_are_lowered_and_correct(synth: OfflineSynthesizer) -> None:
    """Class weights, label smoothing, ignore_index and every reduction (functional and
    module forms) decompose into row kernels (no library call) and match torch on odd
    shapes, including a batch whose rows are mostly or all ignored."""
    jobs = []
    for k, (opts, module) in enumerate(CROSS_ENTROPY_OPTIONS):
        src = _cross_entropy_spec(opts, module)
        source, _full, fallbacks = synth.lower(synth._capture(src, f"ce{k}"), {})
        assert fallbacks == () and "@triton.jit" in source, (opts, fallbacks)
        jobs.append({"id": opts, "spec_source": src, "candidate_source": source, "seeds": [1, 2]})
    bad = [(r["id"], r["error"][-300:] or r["trials"]) for r in run_in_subprocess(jobs) if not r["ok"]]
    assert not bad, bad


def test_check_lets_float64_decide_where_eager_is_as_far_off() -> None:
    """The synthesizer's check: an element outside the eager bound passes only where eager
    itself is as far from the float64 result (FLOAT64_FACTOR times), NaN must match."""
    import torch

    from ke_synthesizer.offline.check import _within

    exact = torch.linspace(-1.0, 1.0, 11, dtype=torch.float64)
    eager = (exact + 0.05).to(torch.float16)  # eager 0.05 off everywhere
    closer = (exact + 0.02).to(torch.float16)  # 0.03 from eager, outside atol 0.01; closer to float64
    assert _within(eager, closer, exact, 0.01, 0.01)
    assert not _within(eager, exact.neg().to(torch.float16), exact, 0.01, 0.01)  # wrong values
    accurate = exact.to(torch.float16)  # eager accurate: the bound is the eager one
    assert not _within(accurate, (exact + 0.05).to(torch.float16), exact, 0.01, 0.01)
    nan = closer.clone()
    nan[3] = float("nan")
    assert not _within(eager, nan, exact, 0.01, 0.01)
