"""The attention kernel family (README.md: *Kernel kinds*). Imports only the shared layers:
frontend, plan, emit and the family interface (families.family)."""
