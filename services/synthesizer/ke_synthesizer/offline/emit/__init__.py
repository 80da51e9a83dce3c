"""Emit layer of the offline synthesizer: the toolkit every family generates code with
(pointwise expressions, launcher helpers, the ``tl.dot`` precision knob, the CUDA-graph
wrapper). Imports only the front end and the plan layer, never a family (README.md:
*Layers*)."""
