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

Offered only for plans whose forward launches at least ``MIN_KERNELS`` kernels (whole-model
specs, recurrent layers: ``KernelFamily.launches``), where launch overhead is worth a graph.
"""

from __future__ import annotations

from kernelevolve import graph_replay

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

# The helpers and the forward are the one replay the evaluator admits (compared as syntax
# trees): their text lives in the shared library so the emitter and the judge cannot drift.
HELPERS = graph_replay.HELPERS
forward_wrapper = graph_replay.forward_lines
