"""The generated source of every example spec's seed and single-knob variants equals the
checked-in golden kernels (tests/synthesizer/golden). All variants run by default: the
whole set (about 2,900 lowerings, one capture per spec) generates in about 30 s on 2 CPU
cores. An intended change to generated code fails here with the first differences; then
regenerate with ``python -m tests.synthesizer.golden --update`` and commit the reviewed diff.
"""

from __future__ import annotations

import pytest

from ke_synthesizer.offline import OfflineSynthesizer
from tests.synthesizer.golden import (
    REGENERATE,
    SEED,
    Spec,
    apply_diff,
    compare,
    file_name,
    generate,
    specs,
    variant_diff,
)

SPECS = specs()
_SYNTH = OfflineSynthesizer(cache_size=4)


@pytest.mark.parametrize("spec", SPECS, ids=[f"{s.suite}/{s.name}" for s in SPECS])
def test_generated_source_matches_golden(spec: Spec) -> None:
    files = list(generate(_SYNTH, spec))
    assert files[0][0] == SEED
    reports = compare(spec, files)
    assert not reports, "\n".join(reports)
    # nothing stale: every checked-in file is one the generator writes
    assert sorted(p.name for p in spec.folder.iterdir()) == sorted(name for name, _ in files)


def test_every_example_has_golden_kernels() -> None:
    assert len(SPECS) > 100
    assert all((s.folder / SEED).is_file() for s in SPECS)


def test_a_changed_kernel_is_reported_as_a_diff_with_the_regeneration_command() -> None:
    spec = next(s for s in SPECS if s.name == "relu_scale_add")
    files = list(generate(_SYNTH, spec))
    seed = files[0][1]
    changed_seed = seed.replace("tl.store", "tl.store  # changed", 1)
    assert changed_seed != seed
    name, text = files[1]
    variant = apply_diff(seed, text)
    changed_variant = variant_diff(changed_seed, variant.replace("def ", "def  ", 1), name)
    reports = compare(spec, [(SEED, changed_seed), (name, changed_variant)])
    assert len(reports) == 3  # seed, variant, how to regenerate
    assert "+" in reports[0] and "tl.store  # changed" in reports[0]
    assert "def  " in reports[1]
    assert REGENERATE in reports[-1]


@pytest.mark.parametrize("seed, variant", [
    ("a\nb\nc\n", "a\nc\n"), ("a\nb", "a\nb\n"), ("", "x\n"), ("x\n", ""), ("same\n", "same\n"),
    ("a\n" * 10 + "b\n" + "a\n" * 10, "c\n" + "a\n" * 20 + "d"),
])
def test_variant_diffs_apply_back_to_the_variant(seed: str, variant: str) -> None:
    assert apply_diff(seed, variant_diff(seed, variant, "v.diff")) == variant


def test_file_names_are_filesystem_safe() -> None:
    assert file_name("g0.BLOCK_SIZE", "256") == "g0.BLOCK_SIZE=256.diff"
    assert file_name("epilogue.add/1", "off:x y") == "epilogue.add_1=off_x_y.diff"
