"""Integer elementwise ops with torch's exact integer semantics (kernel_integer.py)."""
