"""Device copy bandwidth against transfer size: how much of the large-copy roofline a
perfect memory-bound kernel can reach at the sizes the search benchmark runs.

    python bench/copy_bandwidth_sizes.py --out DIR

Writes DIR/copy_bandwidth_sizes.json and prints a table: per size, torch's own
device-to-device copy (``y.copy_(x)``, bytes read + written) by ``triton.testing.do_bench``
(median, L2 flushed between calls) and its share of the largest size's bandwidth.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from common import fingerprint, write_json


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "bench/results")))
    args = ap.parse_args()
    import torch
    import triton.testing

    rows = []
    for log2 in range(20, 29, 1):  # 2^20 .. 2^28 fp32 elements: 4 MiB .. 1 GiB per tensor
        x = torch.randn(2**log2, device="cuda")
        y = torch.empty_like(x)
        ms = triton.testing.do_bench(lambda x=x, y=y: y.copy_(x), warmup=25, rep=200, return_mode="median")
        rows.append({"elements": 2**log2, "mib_per_tensor": 2**log2 * 4 / 2**20, "us": ms * 1e3,
                     "gbps": 2 * x.numel() * 4 / (ms * 1e-3) / 1e9})
        del x, y
    peak = rows[-1]["gbps"]
    for r in rows:
        r["fraction_of_largest"] = r["gbps"] / peak
        print(f"2^{r['elements'].bit_length() - 1:<3} {r['mib_per_tensor']:7.0f} MiB  {r['us']:8.1f} us  "
              f"{r['gbps']:6.0f} GB/s  {r['fraction_of_largest'] * 100:5.1f}%")
    write_json(args.out / "copy_bandwidth_sizes.json",
               {"date": time.strftime("%Y-%m-%d"), "fingerprint": fingerprint(), "rows": rows})
    print(fingerprint())


if __name__ == "__main__":
    main()
