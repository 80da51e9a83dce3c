"""The one CUDA-graph replay a candidate may contain: helpers and forward, as emitted.

A candidate whose forward captures itself into a CUDA graph writes state from its
forward (the graphs and their static buffers) and replays kernels the launch counter
does not see. The evaluator admits exactly this code, compared as syntax trees: the
module-level helpers below, and a ``forward`` that is ``forward_lines`` for its own
parameters. The replay copies every call's inputs into the static buffers, replays,
and returns clones of the static outputs; nothing else of the candidate may keep state
across calls (``static_policy``). The offline synthesizer's ``cuda_graph`` knob emits
this text (tests/evaluator/test_graph_audit.py keeps the two in step).

Stdlib only.
"""

from __future__ import annotations

# module-level helpers of a candidate with cuda_graph=on; the runner is a parameter of
# _GraphReplay so the replay logic can be exercised off CUDA with an eager stand-in
HELPERS = '''
def _graph_runner(fn, static_inputs):
    """Capture ``fn(*static_inputs)`` into a CUDA graph: (replay, static outputs)."""
    fn(*static_inputs)  # outside the capture: kernels compile, allocations settle
    torch.cuda.synchronize()
    cuda_graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(cuda_graph):
        outputs = fn(*static_inputs)
    return cuda_graph.replay, outputs


def _graph_key(args):
    return tuple((tuple(a.shape), a.dtype, tuple(a.stride()), str(a.device)) if isinstance(a, torch.Tensor)
                 else repr(a) for a in args)


def _graph_ok(args):
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    return bool(tensors) and all(t.is_cuda for t in tensors)


def _clone_outputs(value):
    if isinstance(value, torch.Tensor):
        return value.clone()
    if isinstance(value, (tuple, list)):
        return type(value)(_clone_outputs(v) for v in value)
    return value


class _GraphReplay:
    """One captured forward per input signature; returns clones of the static outputs."""

    def __init__(self, runner):
        self.runner = runner
        self.graphs = {}

    def __call__(self, fn, args):
        key = _graph_key(args)
        entry = self.graphs.get(key)
        if entry is None:
            static_inputs = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
            replay, outputs = self.runner(fn, static_inputs)
            entry = (static_inputs, replay, outputs)
            self.graphs[key] = entry
        static_inputs, replay, outputs = entry
        for dst, src in zip(static_inputs, args):
            if isinstance(dst, torch.Tensor):
                dst.copy_(src)
        replay()
        return _clone_outputs(outputs)
'''


def forward_lines(signature: str, params: list[str]) -> list[str]:
    """Lines of ``forward`` (class-body indentation) dispatching to ``_forward_eager``."""
    args = ", ".join(params)
    packed = f"({args},)" if len(params) == 1 else f"({args})"
    return [
        f"    def forward({signature}):",
        "        # cuda_graph=on: one CUDA graph replay per call on CUDA inputs, the eager forward elsewhere",
        f"        if not _graph_ok({packed}):",
        f"            return self._forward_eager({args})",
        "        replay = getattr(self, '_ke_graph_replay', None)",
        "        if replay is None:",
        "            replay = _GraphReplay(_graph_runner)",
        "            self._ke_graph_replay = replay",
        f"        return replay(self._forward_eager, {packed})",
        "",
    ]
