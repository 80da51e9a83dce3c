"""``kernelevolve export``: take a session's best kernel out of the run folder, ready to ship.

    kernelevolve export RUN_DIR --as module|torch-library [--name NS::op] [--out DIR]

writes into DIR (default ``RUN_DIR/export/<as>``):

* ``kernel.py``      the best candidate as found (a standalone ``ModelNew``; torch + triton only)
* ``reference.py``   the operator spec it was verified against
* ``module.py``      ``ExportedModel``: ``ModelNew`` that refuses input shapes it was not verified on
* ``op.py``          (torch-library) a ``torch.library.custom_op`` ``NS::op`` with a fake
                     implementation, so the op goes through ``torch.compile(fullgraph=True)``
                     without a graph break
* ``test_export.py`` pytest checks against the reference on fresh inputs (and torch.compile)
* ``export.json``    what was exported: session, candidate, speedup, device, verified shapes

Shapes: the evaluator verified the kernel on the spec's ``get_inputs()`` shapes and on every
``get_extra_inputs()`` set. The export records those signatures and refuses any other with
an error that says which shapes it was verified on (it never silently runs an unverified
shape). The signatures and output shapes are taken by running the reference once here, on
the CPU.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelevolve.errors import InvalidArgumentError, NotFoundError

FORMATS = ("module", "torch-library")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*::[A-Za-z_][A-Za-z0-9_]*$")


@dataclass
class ExportResult:
    out_dir: Path
    format: str
    op_name: str
    candidate_id: str
    speedup: float
    files: list[str]
    verified_shapes: list[Any]

    def to_dict(self) -> dict[str, Any]:
        return {"out_dir": str(self.out_dir), "format": self.format, "op_name": self.op_name,
                "candidate_id": self.candidate_id, "speedup": self.speedup, "files": self.files,
                "verified_shapes": self.verified_shapes,
                "test": f"pytest {self.out_dir / 'test_export.py'}"}


def _ident(text: str) -> str:
    s = re.sub(r"[^A-Za-z0-9_]", "_", text) or "op"
    return s if not s[0].isdigit() else f"op_{s}"


def _load_spec(path: Path) -> Any:
    name = f"_ke_export_spec_{uuid.uuid4().hex[:8]}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise InvalidArgumentError(f"cannot import {path}")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    try:
        spec.loader.exec_module(mod)
    finally:
        sys.modules.pop(name, None)
    return mod


def _arg_sig(value: Any) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        return {"kind": "tensor", "shape": list(value.shape), "dtype": str(value.dtype).removeprefix("torch.")}
    if isinstance(value, bool):
        return {"kind": "bool"}
    if isinstance(value, int):
        return {"kind": "int"}
    if isinstance(value, float):
        return {"kind": "float"}
    raise InvalidArgumentError(f"an input of type {type(value).__name__} cannot be an operator argument; "
                               "only tensors, ints, floats and bools can (try --as module)")


def _out_sig(value: Any) -> list[dict[str, Any]]:
    import torch

    outs = list(value) if isinstance(value, (tuple, list)) else [value]
    if not outs or not all(isinstance(o, torch.Tensor) for o in outs):
        raise InvalidArgumentError("the reference must return a tensor or a tuple of tensors to be exported as an op")
    return [{"shape": list(o.shape), "stride": list(o.stride()), "dtype": str(o.dtype).removeprefix("torch.")}
            for o in outs]


def _signatures(spec_path: Path) -> tuple[list[dict[str, Any]], bool]:
    """One entry per verified input set: its argument signatures and the reference's outputs."""
    import torch

    mod = _load_spec(spec_path)
    sets = []
    with torch.no_grad():
        torch.manual_seed(0)
        model = mod.Model(*mod.get_init_inputs())
        torch.manual_seed(0)
        inputs = [list(mod.get_inputs())]
        if hasattr(mod, "get_extra_inputs"):
            torch.manual_seed(0)
            inputs += [list(x) for x in mod.get_extra_inputs()]
        tuple_out = False
        for args in inputs:
            out = model(*args)
            tuple_out = isinstance(out, (tuple, list))
            sets.append({"args": [_arg_sig(a) for a in args], "outputs": _out_sig(out)})
    return sets, tuple_out


def _best(run_dir: Path) -> tuple[str, float, str, str]:
    summary = json.loads((run_dir / "summary.json").read_text()) if (run_dir / "summary.json").is_file() else {}
    cid = str(summary.get("best_candidate_id") or "")
    if not cid:
        raise NotFoundError(f"{run_dir}: the session found no correct kernel, nothing to export")  # exit 1
    src_path = run_dir / "candidates" / f"{cid}.py"
    if not src_path.is_file():
        src_path = run_dir / "best_kernel.py"
    if not src_path.is_file():
        raise InvalidArgumentError(f"{run_dir}: no source for the best candidate {cid}")
    device = ""
    rp = run_dir / "reports" / f"{cid}.json"
    if rp.is_file():
        device = str(json.loads(rp.read_text()).get("device") or "")
    return cid, float(summary.get("best_speedup") or 0.0), src_path.read_text(encoding="utf-8"), device


def export_run(run_dir: str | Path, fmt: str = "torch-library", name: str | None = None,
               out: str | Path | None = None, force: bool = False) -> ExportResult:
    run = Path(run_dir)
    if not run.is_dir():
        raise InvalidArgumentError(f"run folder {run} does not exist")
    if fmt not in FORMATS:
        raise InvalidArgumentError(f"--as must be one of {', '.join(FORMATS)}, got {fmt!r}")
    spec_path = run / "spec.py"
    if not spec_path.is_file():
        raise InvalidArgumentError(f"{run}: no spec.py (is it a run folder?)")
    cid, speedup, source, device = _best(run)
    summary = json.loads((run / "summary.json").read_text())
    spec_name = str(summary.get("spec") or "operator")
    op_name = name or f"kernelevolve::{_ident(spec_name)}"
    if not _NAME.match(op_name):
        raise InvalidArgumentError(f"--name must look like namespace::op (identifiers), got {op_name!r}")
    out_dir = Path(out) if out is not None else run / "export" / fmt.replace("-", "_")
    if out_dir.exists() and any(out_dir.iterdir()):
        if not force:
            raise InvalidArgumentError(f"{out_dir} exists and is not empty; choose another --out or pass --force")
        shutil.rmtree(out_dir)
    sets, tuple_out = _signatures(spec_path)
    out_dir.mkdir(parents=True, exist_ok=True)
    manifest = {"session_id": summary.get("session_id", ""), "spec": spec_name, "candidate_id": cid,
                "speedup_vs_eager": speedup, "measured_on": device,
                # the speedup holds under this contract only (kernelevolve.precision)
                "precision": summary.get("precision") or "strict", "format": fmt, "op_name": op_name,
                "verified_sets": sets, "tuple_output": tuple_out}
    files = {
        "kernel.py": source,
        "reference.py": spec_path.read_text(encoding="utf-8"),
        "export.json": json.dumps(manifest, indent=2) + "\n",
        "module.py": _render(MODULE_PY, manifest),
        "test_export.py": _render(TEST_PY, manifest),
        "__init__.py": _render(INIT_PY, manifest),
    }
    if fmt == "torch-library":
        files["op.py"] = _render_op(manifest)
    for fname, text in files.items():
        (out_dir / fname).write_text(text, encoding="utf-8")
    return ExportResult(out_dir, fmt, op_name, cid, speedup, sorted(files), sets)


def _render(template: str, m: dict[str, Any]) -> str:
    ns, op = m["op_name"].split("::")
    return (template.replace("@SPEC@", m["spec"]).replace("@CID@", m["candidate_id"])
            .replace("@SID@", str(m["session_id"])).replace("@SPEEDUP@", f"{m['speedup_vs_eager']:.4g}")
            .replace("@DEVICE@", m["measured_on"] or "?").replace("@OPNAME@", m["op_name"])
            .replace("@NS@", ns).replace("@OP@", op).replace("@FORMAT@", m["format"])
            .replace("@HAS_OP@", repr(m["format"] == "torch-library")))


def _render_op(m: dict[str, Any]) -> str:
    args = m["verified_sets"][0]["args"]
    kinds = [a["kind"] for a in args]
    for s in m["verified_sets"][1:]:
        if [a["kind"] for a in s["args"]] != kinds:
            raise InvalidArgumentError("the spec's input sets do not share one argument list; use --as module")
    types = {"tensor": "torch.Tensor", "int": "int", "float": "float", "bool": "bool"}
    names = [f"x{i}" for i in range(len(args))]
    params = ", ".join(f"{n}: {types[k]}" for n, k in zip(names, kinds, strict=True))
    n_out = len(m["verified_sets"][0]["outputs"])
    ret = "torch.Tensor" if not m["tuple_output"] else f"tuple[{', '.join(['torch.Tensor'] * n_out)}]"
    call = ", ".join(names)
    return (_render(OP_PY, m).replace("@PARAMS@", params).replace("@RET@", ret).replace("@CALL@", call)
            .replace("@TUPLE@", repr(bool(m["tuple_output"]))))


INIT_PY = '''"""KernelEvolve export of @SPEC@ (candidate @CID@ of session @SID@); see export.json."""
'''

MODULE_PY = '''"""KernelEvolve export of @SPEC@: candidate @CID@ of session @SID@, @SPEEDUP@x vs eager PyTorch
measured on @DEVICE@. Standalone: torch + triton, plus kernel.py beside this file.

    from module import ExportedModel          # or load it by path
    model = ExportedModel(*init_inputs)       # drop-in for the spec's Model
    y = model(*inputs)                        # refuses input shapes it was not verified on

On a machine without a CUDA GPU set TRITON_INTERPRET=1 before importing (Triton's interpreter).
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import torch

HERE = Path(__file__).resolve().parent
MANIFEST = json.loads((HERE / "export.json").read_text())
VERIFIED_SETS: list[dict[str, Any]] = MANIFEST["verified_sets"]


def _load(stem: str) -> Any:
    name = f"_ke_export_{abs(hash(str(HERE)))}_{stem}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, HERE / f"{stem}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


kernel = _load("kernel")
reference = _load("reference")


class UnverifiedShapeError(ValueError):
    """Raised for inputs the exported kernel was never verified on."""


def _sig(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return {"kind": "tensor", "shape": list(value.shape), "dtype": str(value.dtype).removeprefix("torch.")}
    if isinstance(value, bool):
        return {"kind": "bool"}
    if isinstance(value, int):
        return {"kind": "int"}
    if isinstance(value, float):
        return {"kind": "float"}
    return {"kind": type(value).__name__}


def _show(args: list[Any]) -> str:
    return "(" + ", ".join(f"{a['dtype']}{a['shape']}" if a["kind"] == "tensor" else a["kind"] for a in args) + ")"


def match(inputs: list[Any] | tuple[Any, ...]) -> dict[str, Any]:
    """The verified set these inputs belong to, or UnverifiedShapeError naming the verified ones."""
    sig = [_sig(x) for x in inputs]
    for s in VERIFIED_SETS:
        if s["args"] == sig:
            return s
    verified = "; ".join(_show(s["args"]) for s in VERIFIED_SETS)
    raise UnverifiedShapeError(
        f"@OPNAME@ (KernelEvolve candidate @CID@) was verified only on inputs {verified}; got {_show(sig)}. "
        "Add this shape to the spec's get_extra_inputs() and run kernelevolve optimize again, or use the reference.")


def new_model(*init_inputs: Any) -> torch.nn.Module:
    """ModelNew with the reference's parameters (built from the same seed, state loaded when it matches)."""
    if not init_inputs:
        init_inputs = tuple(reference.get_init_inputs())
    torch.manual_seed(0)
    ref = reference.Model(*init_inputs)
    torch.manual_seed(0)
    model = kernel.ModelNew(*init_inputs)
    try:
        model.load_state_dict(ref.state_dict())
    except (RuntimeError, KeyError):
        pass
    return model


class ExportedModel(torch.nn.Module):
    """``ModelNew`` behind a shape guard: runs only on the input signatures it was verified on."""

    def __init__(self, *init_inputs: Any) -> None:
        super().__init__()
        self.inner = new_model(*init_inputs)

    def forward(self, *inputs: Any) -> Any:
        match(inputs)
        return self.inner(*inputs)
'''

OP_PY = '''"""KernelEvolve export of @SPEC@ as the custom op ``torch.ops.@NS@.@OP@`` (torch.library.custom_op):
candidate @CID@ of session @SID@, @SPEEDUP@x vs eager PyTorch measured on @DEVICE@.

    import op                                  # registers torch.ops.@NS@.@OP@
    y = torch.ops.@NS@.@OP@(@CALL@)
    y = torch.compile(f, fullgraph=True)(...)  # no graph break: the op has a fake implementation

The op runs the Triton kernels of kernel.py with the reference's parameters (fixed at import),
only on the input signatures it was verified on (export.json); others raise
module.UnverifiedShapeError, in eager mode and at trace time under torch.compile.
On a machine without a CUDA GPU set TRITON_INTERPRET=1 before importing.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import torch

_HERE = Path(__file__).resolve().parent
_NAME = f"_ke_export_{abs(hash(str(_HERE)))}_module"
if _NAME in sys.modules:
    module = sys.modules[_NAME]
else:
    _spec = importlib.util.spec_from_file_location(_NAME, _HERE / "module.py")
    assert _spec is not None and _spec.loader is not None
    module = importlib.util.module_from_spec(_spec)
    sys.modules[_NAME] = module
    _spec.loader.exec_module(module)

UnverifiedShapeError = module.UnverifiedShapeError
OP_NAME = "@OPNAME@"
_TUPLE = @TUPLE@
_models: dict[str, torch.nn.Module] = {}


def _model(device: torch.device) -> torch.nn.Module:
    key = str(device)
    if key not in _models:
        _models[key] = module.new_model().to(device).eval()
    return _models[key]


def _device(args: tuple[Any, ...]) -> torch.device:
    return next((a.device for a in args if isinstance(a, torch.Tensor)), torch.device("cpu"))


@torch.library.custom_op(OP_NAME, mutates_args=())
def _op(@PARAMS@) -> @RET@:
    args = (@CALL@,)
    module.match(args)
    with torch.no_grad():
        out = _model(_device(args))(*args)
    if _TUPLE:
        return tuple(o.clone() if any(o is a for a in args) else o for o in out)
    return out.clone() if any(out is a for a in args) else out


@_op.register_fake
def _(@PARAMS@) -> @RET@:
    args = (@CALL@,)
    outs = [torch.empty_strided(o["shape"], o["stride"], dtype=getattr(torch, o["dtype"]), device=_device(args))
            for o in module.match(args)["outputs"]]
    return tuple(outs) if _TUPLE else outs[0]


class ExportedOpModel(torch.nn.Module):
    """A drop-in for the spec's Model whose forward is the custom op."""

    def forward(self, *inputs: Any) -> Any:
        return _op(*inputs)


@OP@ = _op  # the custom op as a Python callable; also torch.ops.@NS@.@OP@
'''

TEST_PY = '''"""Checks the exported kernel (@SPEC@, candidate @CID@) against the reference on fresh inputs.

    pytest test_export.py        (on CPU: TRITON_INTERPRET=1 is set here before triton loads)

KE_EXPORT_COMPILE_BACKEND picks torch.compile's backend for the custom-op test (default
inductor, which on CPU needs a C++ compiler; aot_eager needs none).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

HERE = Path(__file__).resolve().parent
HAS_OP = @HAS_OP@
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def _load(stem: str):
    name = f"_ke_export_{abs(hash(str(HERE)))}_{stem}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, HERE / f"{stem}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


module = _load("module")
reference = module.reference


def _input_sets(seed: int):
    torch.manual_seed(seed)
    sets = [list(reference.get_inputs())]
    if hasattr(reference, "get_extra_inputs"):
        sets += [list(x) for x in reference.get_extra_inputs()]
    return [[x.to(DEVICE) if isinstance(x, torch.Tensor) else x for x in s] for s in sets]


def _ref_model():
    torch.manual_seed(0)
    return reference.Model(*reference.get_init_inputs()).to(DEVICE)


def _close(got, want):
    got = list(got) if isinstance(got, (tuple, list)) else [got]
    want = list(want) if isinstance(want, (tuple, list)) else [want]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        torch.testing.assert_close(g, w, atol=getattr(reference, "ATOL", 1e-4) * 10,
                                   rtol=getattr(reference, "RTOL", 1e-4) * 10)


@pytest.mark.parametrize("seed", [101, 202])
def test_module_matches_reference_on_fresh_inputs(seed):
    model = module.ExportedModel().to(DEVICE)
    ref = _ref_model()
    with torch.no_grad():
        for inputs in _input_sets(seed):
            _close(model(*inputs), ref(*inputs))


def test_unverified_shape_is_refused():
    inputs = _input_sets(7)[0]
    i = next(i for i, x in enumerate(inputs) if isinstance(x, torch.Tensor))
    bad = list(inputs)
    bad[i] = torch.zeros(*[d + 3 for d in inputs[i].shape], dtype=inputs[i].dtype, device=DEVICE)
    with pytest.raises(module.UnverifiedShapeError, match="verified only on"):
        module.ExportedModel().to(DEVICE)(*bad)


@pytest.mark.skipif(not HAS_OP, reason="exported --as module: no custom op")
def test_custom_op_matches_reference_and_opcheck():
    op = _load("op")
    fn = getattr(torch.ops, op.OP_NAME.split("::")[0]).__getattr__(op.OP_NAME.split("::")[1])
    ref = _ref_model()
    with torch.no_grad():
        for inputs in _input_sets(303):
            _close(fn(*inputs), ref(*inputs))
    inputs = _input_sets(404)[0]
    torch.library.opcheck(fn.default, tuple(inputs),
                          test_utils=("test_schema", "test_faketensor", "test_aot_dispatch_static"))


@pytest.mark.skipif(not HAS_OP, reason="exported --as module: no custom op")
def test_custom_op_compiles_without_graph_breaks():
    op = _load("op")
    backend = os.environ.get("KE_EXPORT_COMPILE_BACKEND") or "inductor"
    model = op.ExportedOpModel()
    ref = _ref_model()
    torch._dynamo.reset()
    compiled = torch.compile(model, fullgraph=True, backend=backend)
    with torch.no_grad():
        for inputs in _input_sets(505):
            _close(compiled(*inputs), ref(*inputs))
'''
