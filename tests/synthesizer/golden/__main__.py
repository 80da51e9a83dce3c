"""``python -m tests.synthesizer.golden [--update] [--spec NAME]``: compare (or rewrite)
the golden kernels; see the package docstring."""

from __future__ import annotations

import argparse
import sys
import time

from ke_synthesizer.offline import OfflineSynthesizer

from . import GOLDEN_DIR, compare, generate, specs, write


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.synthesizer.golden")
    parser.add_argument("--update", action="store_true", help="rewrite the golden files")
    parser.add_argument("--spec", action="append", help="only this spec (repeatable)")
    args = parser.parse_args(argv)
    synth = OfflineSynthesizer()
    start = time.perf_counter()
    count = failed = 0
    for spec in specs():
        if args.spec and spec.name not in args.spec:
            continue
        files = list(generate(synth, spec))
        count += len(files)
        if args.update:
            write(spec, files)
            continue
        reports = compare(spec, files)
        failed += max(len(reports) - 1, 0)
        for report in reports:
            sys.stdout.write(report + "\n")
    took = time.perf_counter() - start
    verb = "wrote" if args.update else f"compared ({failed} differ)"
    sys.stdout.write(f"{count} golden kernels {verb} under {GOLDEN_DIR.name}/ in {took:.1f} s\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
