"""Data movement, indexing, lookups, segment reductions and scatters (kernel_index.py,
kernel_scatter.py)."""
