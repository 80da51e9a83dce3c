"""Command line: run N generated cases from seed S and print the tally.

    python -m tests.synthesizer.fuzz --start 0 --count 200 [--genomes] [--save] [--chunk 50]
"""

from __future__ import annotations

import argparse
import sys

from ke_synthesizer.offline import OfflineSynthesizer

from .runner import run_cases, save_regression


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--count", type=int, default=100)
    ap.add_argument("--chunk", type=int, default=50, help="cases per child interpreter")
    ap.add_argument("--genomes", action="store_true", help="also lower one random genome per case")
    ap.add_argument("--save", action="store_true", help="write failing cases to tests/synthesizer/regressions/")
    ap.add_argument("--verbose", action="store_true", help="list each candidate's library calls")
    args = ap.parse_args(argv)
    synth = OfflineSynthesizer()
    totals = [0] * 6
    failed = refused = 0
    for lo in range(args.start, args.start + args.count, args.chunk):
        hi = min(lo + args.chunk, args.start + args.count)
        report = run_cases(synth, range(lo, hi), genomes=args.genomes)
        print(f"seeds {lo}..{hi - 1}: {report.summary()}", flush=True)
        if args.verbose:
            for jid, nodes in report.fallbacks.items():
                print(f"  library calls in {jid}: {', '.join(nodes)}")
        for f in report.refused:
            print(f"  refused {f.case.name} [{' -> '.join(f.case.steps)}]: {f.reason[:200]}")
        for f in report.failures:
            where = f" genome={f.genome}" if f.genome else ""
            print(f"  FAIL {f.case.name} [{' -> '.join(f.case.steps)}, {f.case.dtype}]{where}: {f.reason[:400]}")
            if args.save:
                print(f"    saved {save_regression(f)}")
        failed += len(report.failures)
        refused += len(report.refused)
        for i, n in enumerate((report.cases, report.invalid, report.candidates, report.full, report.partial,
                               report.none)):
            totals[i] += n
    print(f"total: {totals[0]} cases ({totals[1]} invalid references), {totals[2]} candidates: "
          f"{totals[3]} lowered fully, {totals[4]} partly, {totals[5]} not at all; "
          f"{refused} refused an extra shape set; {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
