"""``python -m ke_evaluator.worker``: start one worker process (see ``process.py``)."""

from __future__ import annotations

import sys

from ke_evaluator.worker.process import main

sys.exit(main())
