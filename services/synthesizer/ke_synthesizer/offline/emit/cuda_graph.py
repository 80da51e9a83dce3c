"""The ``cuda_graph`` knob: the whole generated forward captured once into a CUDA graph
and replayed on later calls.

A whole model lowers to many small kernels whose launches (and the launchers' host
work) can cost more than the kernels themselves; one graph replay launches them all.
With ``cuda_graph=on`` the generated forward becomes ``_forward_eager`` and ``forward``:

- off CUDA (any tensor input not on a CUDA device, or no tensor input) calls
  ``_forward_eager`` directly: the plain path, unchanged;
- on CUDA keeps one captured graph per input signature (shapes, dtypes, strides,
  devices, non-tensor arguments): the first call with a signature copies the inputs into
  static buffers, runs the eager forward once outside the capture (Triton compiles,
  allocations settle) and captures it; every call copies its inputs into the static
  buffers, replays, and returns **clones** of the static outputs, so a returned tensor
  never aliases the graph's memory (a later call would overwrite it) nor an input.

The candidate cannot catch a failed capture (the evaluator's static policy refuses
try/except around the kernel path); a forward that cannot be captured (host sync in a
launcher) fails visibly and the search keeps the ``off`` genome. The capture runs on
the caller's stream through ``torch.cuda.graph``; the evaluator allows exactly the
spellings ``torch.cuda.CUDAGraph`` and ``torch.cuda.graph`` for this.

Offered only for plans with at least ``MIN_KERNELS`` kernels (whole-model specs), where
launch overhead is worth a graph.
"""

from __future__ import annotations

KNOB = "cuda_graph"
CHOICES = ("off", "on")
MIN_KERNELS = 3
# Whether the search explores the knob by itself. It does: the evaluator audits a replay
# (its README, "CUDA graph replays": the graph's captured launches count as the
# candidate's own only when it captured them, the emitted helpers are the only state
# forward may write, every exploit check still runs), so a replay is judged like any other
# candidate. Measured on an H100 over 18 whole models: 4.19x faster per call than one
# launch per kernel (bench/RESULTS.md).
SEARCHED = True

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


def forward_wrapper(signature: str, params: list[str]) -> list[str]:
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
