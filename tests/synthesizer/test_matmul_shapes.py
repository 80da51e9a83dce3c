"""The remaining matmul shapes (frontend/matmul_shapes.py): dot, vdot, vector matmul,
inner, mv, addmv, outer / ger, addr, baddbmm, addbmm, kron are rewritten into ops the
families lower, leave nothing to the library and match their references in the
interpreter (odd sizes, beta / alpha, beta = 0 with a NaN in the ignored input)."""

from __future__ import annotations

from typing import Any

import pytest

from ke_synthesizer.offline import OfflineSynthesizer

from .test_index_family import R, _spec, lower_and_check

CASES: dict[str, tuple[str, list[str]]] = {
    "dot": ("torch.dot(x, y)", [f"{R}(33)", f"{R}(33)"]),
    "vdot": ("torch.vdot(x, y)", [f"{R}(7)", f"{R}(7)"]),
    "matmul_vectors": ("torch.matmul(x, y)", [f"{R}(1000)", f"{R}(1000)"]),
    "inner_matrix": ("torch.inner(x, y)", [f"{R}(5, 7)", f"{R}(3, 7)"]),
    "mv": ("torch.mv(x, y)", [f"{R}(33, 7)", f"{R}(7)"]),
    "addmv": ("torch.addmv(z, x, y, beta=0.5, alpha=2)", [f"{R}(33, 7)", f"{R}(7)", f"{R}(33)"]),
    "addmv_beta0": ("torch.addmv(z, x, y, beta=0)", [f"{R}(5, 7)", f"{R}(7)", "torch.full((5,), float('nan'))"]),
    "outer": ("torch.outer(x, y)", [f"{R}(7)", f"{R}(33)"]),
    "ger": ("torch.ger(x, y)", [f"{R}(1)", f"{R}(5)"]),
    "addr": ("torch.addr(z, x, y, alpha=3)", [f"{R}(7)", f"{R}(5)", f"{R}(7, 5)"]),
    "baddbmm": ("torch.baddbmm(z, x, y, beta=2, alpha=0.5)", [f"{R}(3, 5, 7)", f"{R}(3, 7, 4)", f"{R}(3, 5, 4)"]),
    "addbmm": ("torch.addbmm(z, x, y)", [f"{R}(3, 5, 7)", f"{R}(3, 7, 4)", f"{R}(5, 4)"]),
    "kron": ("torch.kron(x, y)", [f"{R}(2, 3)", f"{R}(4, 5)"]),
    "kron_vectors": ("torch.kron(x, y)", [f"{R}(3)", f"{R}(7)"]),
}


@pytest.fixture(scope="module")
def lowered(synth: OfflineSynthesizer) -> dict[str, dict[str, Any]]:
    return lower_and_check(synth, {name: _spec(body, inputs) for name, (body, inputs) in CASES.items()})


@pytest.mark.parametrize("name", sorted(CASES))
def test_matmul_shape_lowered_and_correct(name: str, lowered: dict[str, dict[str, Any]]) -> None:
    result = lowered[name]
    assert result["proposal"].fallback_nodes == ()
    assert "@triton.jit" in result["proposal"].source
    assert result["error"] == "", result["error"]
    assert result["ok"], [t for t in result["trials"] if not t["ok"]]
