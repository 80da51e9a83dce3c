"""The sandboxed side of the evaluator: everything here runs inside a worker process.

A ``Judge`` (``ke_evaluator.judge``, the parent side) starts ``python -m ke_evaluator.worker``
and sends it jobs over pipes (``ke_evaluator.wire``). The worker isolates itself
(``isolation``), imports torch and triton once (``warm_up``) and runs the evaluation
protocol per job (``evaluation``): loading (``loading``), output checks (``output_checks``),
the tolerance policy that judges values (``tolerance``),
the defenses beyond equal values (``defenses``, ``global_state``, ``launch_counter``), the
reference cache (``reference_cache``), timing (``timing``) and diagnosis (``diagnosis``).

Imports only torch, triton, numpy, the standard library and the two stdlib-only modules
it shares with the parent (``ke_evaluator.wire``, ``ke_evaluator.device_lock``) plus the
verdict types: a GPU machine needs nothing else (tests/evaluator/test_worker_imports.py).
"""
