"""Search service: optimisation as graph search (node = kernel, edge = transformation).

``ke_search.state`` holds the per-session bookkeeping, ``ke_search.strategy`` picks
which node to expand next, ``ke_search.service`` reacts to bus events.
"""
