from __future__ import annotations

from pathlib import Path

import pytest

from kernelevolve.errors import InvalidSpecError
from kernelevolve.spec import check_source, load_spec_file
from tests.conftest import EXAMPLES


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.py")), ids=lambda p: p.stem)
def test_every_example_passes_static_checks(path: Path) -> None:
    spec = load_spec_file(path)
    assert spec.name == path.stem and len(spec.sha256) == 64


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("def broken(:\n", "does not parse"),
        ("import torch\ndef get_inputs(): return []\ndef get_init_inputs(): return []\n", "lacks Model"),
        ("class Model: pass\n", "lacks get_inputs, get_init_inputs"),
        ("Model = 3\ndef get_inputs(): return []\ndef get_init_inputs(): return []\n", "Model must be a class"),
    ],
)
def test_bad_specs_are_named(source: str, message: str) -> None:
    with pytest.raises(InvalidSpecError, match=message):
        check_source(source, "bad.py")


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InvalidSpecError, match="does not exist"):
        load_spec_file(tmp_path / "nope.py")
