"""Child process of ``test_channels_last_model.py`` (run with TRITON_INTERPRET=1): each job
runs a spec's reference and a candidate on the spec's inputs and reports whether the
values agree, whether the output strides equal the reference's, and how many activation
layout conversions the candidate's forward made (``aten.clone`` of a 4-D tensor that is
not a parameter: ``.contiguous()`` and ``.contiguous(memory_format=...)`` copy through it;
a weight converted per call is not an activation)."""

from __future__ import annotations

import importlib.util
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode


class _Conversions(TorchDispatchMode):
    def __init__(self, params: set[int]) -> None:
        super().__init__()
        self.params = params
        self.count = 0

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        src = args[0] if args else None
        if func is torch.ops.aten.clone.default and isinstance(src, torch.Tensor) and src.dim() == 4 \
                and src.untyped_storage().data_ptr() not in self.params:
            self.count += 1
        return func(*args, **(kwargs or {}))


def _load(path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def run(job: dict[str, Any], workdir: Path) -> dict[str, Any]:
    (workdir / f"ref_{job['id']}.py").write_text(job["spec_source"])
    (workdir / f"cand_{job['id']}.py").write_text(job["candidate_source"])
    ref, cand = _load(workdir / f"ref_{job['id']}.py"), _load(workdir / f"cand_{job['id']}.py")
    init = list(ref.get_init_inputs())
    torch.manual_seed(3)
    sets = [list(ref.get_inputs())] + [list(s) for s in getattr(ref, "get_extra_inputs", list)()]
    trials = []
    for inputs in sets:
        torch.manual_seed(0)
        m_ref = ref.Model(*init)
        torch.manual_seed(0)
        m_new = cand.ModelNew(*init)
        params = {p.untyped_storage().data_ptr() for p in m_new.parameters()}
        with torch.no_grad():
            want = m_ref(*[x.clone() for x in inputs])
            fresh = [x.clone() for x in inputs]
            mode = _Conversions(params)
            with mode:
                got = m_new(*fresh)
        wants, gots = (list(want), list(got)) if isinstance(want, tuple) else ([want], [got])
        pairs = list(zip(gots, wants, strict=True))
        trials.append({"close": all(torch.allclose(g, w, atol=job["atol"], rtol=job["rtol"]) for g, w in pairs),
                       "err": max(float((g.double() - w.double()).abs().max()) for g, w in pairs),
                       "strides": [[list(w.stride()) for w in wants], [list(g.stride()) for g in gots]],
                       "conversions": mode.count})
    return {"id": job["id"], "trials": trials}


def main() -> None:
    jobs = json.loads(sys.stdin.read())
    with tempfile.TemporaryDirectory() as tmp:
        json.dump([run(job, Path(tmp)) for job in jobs], sys.stdout)


if __name__ == "__main__":
    main()
