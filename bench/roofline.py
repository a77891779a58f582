#!/usr/bin/env python3
"""Cache-aware roofline against measurement on this machine, in one run.

Calibrates the model the way the paper does (spec 002 §3.2): each level's effective bandwidth
from the base test a[i] = a[i]*c[i] + z at b/f 12 and 6 with the working set in that level,
Peff from the base test at b/f 0.375 in L2. Then predicts, with `loopscope roofline`, kernels it
was not calibrated on: the base test at b/f 3 and 1.5 in L1, L2, L3 and memory, and the
paper's mixed memory+L2 stencil (Fig. 5) with 2, 6 and 10 L2 references. Prints predicted
(extended and classic) against measured GFLOP/s and the median absolute errors.

One thread (per-core bandwidths and peak), medians of 5 timed runs of 0.1 s each. The machine
is shared: rerun when the load is high (the load average is printed).

Not compared: kerncraft's RooflineFLOP (it needs kernel files, which `loopscope roofline` does
not read yet).
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HERE = os.path.join(ROOT, "bench", "roofline")
# Working sets of the base test (two arrays of N doubles) per level, sized for caches of at
# least 32 KiB L1, 512 KiB L2, 16 MiB L3; memory far beyond any L3.
LEVELS = {"L1": 1024, "L2": 12288, "L3": 524288, "MEM": 16777216}


def run(cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def measure(binary, *args):
    return float(run([binary, *map(str, args)]))


def main():
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
    subprocess.run(["cargo", "build", "-q", "-p", "loopscope"], check=True, cwd=ROOT)
    loopscope = os.path.join(target, "debug", "loopscope")
    tmp = tempfile.mkdtemp()
    kernels = os.path.join(tmp, "kernels")
    subprocess.run(["cc", "-O3", "-mavx2", "-mfma", "-o", kernels,
                    os.path.join(HERE, "kernels.c")], check=True)

    machine = json.loads(run([loopscope, "machine", "--json"]))
    peak = machine["peak_flops_per_cycle"]["dp"] * machine["nominal_hz"] / 1e9
    print(f"load average {os.getloadavg()[0]:.2f}; peak {peak:.2f} GFLOP/s per core "
          f"({machine['peak_flops_per_cycle']['dp']} FLOP/cycle at the nominal clock)")

    bandwidth = {}
    for level, n in LEVELS.items():
        # b/f 12 and 6: bandwidth = GFLOP/s x bytes per FLOP
        bandwidth[level] = statistics.mean(
            [measure(kernels, "base", 1, n) * 12, measure(kernels, "base", 2, n) * 6])
    peff = min(measure(kernels, "base", 32, LEVELS["L2"]), peak)
    print("calibration: " + ", ".join(f"{l} {b:.1f} GB/s" for l, b in bandwidth.items())
          + f", Peff {peff:.2f} GFLOP/s")

    cases = []
    for k in (4, 8):
        for level, n in LEVELS.items():
            served = "mem=3" if level == "MEM" else f"mem=0,{level.lower()}=3"
            cases.append((f"base K={k} in {level}", f"{served},flops={2 * k}",
                          ("base", k, n), level != "MEM"))
    for r, extra in ((1, 0), (3, 0), (5, 0), (5, 15)):
        name = f"mixed 3M-{2 * r}L2-{2 * r + 2 * extra}F"
        cases.append((name, f"mem=3,l2={2 * r},flops={2 * r + 2 * extra}",
                      ("mixed", r, extra), False))

    bw_flag = ",".join(f"{l}={b:.3f}" for l, b in bandwidth.items())
    rows = []
    print(f"\n{'kernel':<24}{'counts':<24}{'measured':>9}{'extended':>9}{'err':>8}"
          f"{'classic':>9}{'err':>8}  limit")
    for name, counts, args, cached in cases:
        measured = measure(kernels, *args)
        out = json.loads(run([loopscope, "roofline", "--counts", counts, "--bandwidth", bw_flag,
                              "--peak-gflops", f"{peak:.4f}", "--effective-gflops",
                              f"{peff:.4f}", "--json"]))
        ext = out["prediction"]["gflops"]
        cls = out["classic"]["gflops"]
        e_ext = (ext - measured) / measured
        e_cls = (cls - measured) / measured
        rows.append((e_ext, e_cls, cached))
        print(f"{name:<24}{counts:<24}{measured:9.2f}{ext:9.2f}{100 * e_ext:+7.1f}%"
              f"{cls:9.2f}{100 * e_cls:+7.1f}%  {out['prediction']['limit']}")

    med = lambda xs: statistics.median(abs(x) for x in xs)
    ext_all = med(r[0] for r in rows)
    cls_all = med(r[1] for r in rows)
    ext_c = med(r[0] for r in rows if r[2])
    cls_c = med(r[1] for r in rows if r[2])
    print(f"\nmedian |error|, all {len(rows)} kernels: extended {100 * ext_all:.1f} %, "
          f"classic {100 * cls_all:.1f} %")
    print(f"median |error|, cache-resident base kernels: extended {100 * ext_c:.1f} %, "
          f"classic {100 * cls_c:.1f} %")
    print(f"goal extended <= 15 %: {'met' if ext_all <= 0.15 else 'NOT met'}; "
          f"extended below classic on cache-resident kernels: {'yes' if ext_c < cls_c else 'NO'}")
    print("kerncraft RooflineFLOP: not compared (needs kernel-file input, not yet in loopscope)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
