#!/usr/bin/env python3
"""Cache-aware roofline against measurement on this machine, in one run.

Calibrates the model the way the paper does (spec 002 §3.2): each level's effective bandwidth
from the base test a[i] = a[i]*c[i] + z at b/f 12 and 6 with the working set in that level,
Peff from the base test at b/f 0.375 in L1 and L2 (the better). Then predicts, with `loopscope roofline`, kernels it
was not calibrated on: the base test at b/f 3 and 1.5 in L1, L2, L3 and memory, and the
paper's mixed memory+L2 stencil (Fig. 5) with 2, 6 and 10 L2 references. Prints predicted
(extended and classic) against measured GFLOP/s and the median absolute errors.

One thread (per-core bandwidths and peak), medians of 5 timed runs of 0.1 s each. The machine
is shared: rerun when the load is high (the load average is printed).

kerncraft 0.8.18's RooflineFLOP (from PyPI, in bench/.venv, created on first run) runs on the
same kernels written as kerncraft kernel files, with a machine file holding the same calibrated
bandwidths (as its `load` benchmark, whose streams are the base test's) and this machine's
caches. Its CPU roof is wrong (8x too high, see shared/anchors), so where it reports a CPU
bottleneck its figure is not a prediction; such rows are marked.
"""
import json
import os
import re
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


VENV = os.path.join(ROOT, "bench", ".venv")


def kerncraft_binary():
    binary = os.path.join(VENV, "bin", "kerncraft")
    if not os.path.exists(binary):
        subprocess.run([sys.executable, "-m", "venv", VENV], check=True)
        subprocess.run([os.path.join(VENV, "bin", "pip"), "install", "-q", "kerncraft==0.8.18"],
                       check=True)
    return binary


def kerncraft_machine(machine, bandwidth, path):
    """A kerncraft machine file with this machine's caches and the calibrated bandwidths."""
    caches = {c["level"]: c for c in machine["caches"] if c["kind"] != "instruction"}
    levels = []
    names = sorted(caches)
    for index, level in enumerate(names):
        c = caches[level]
        nxt = f"L{names[index + 1]}" if index + 1 < len(names) else None
        links = f", load_from: {nxt}, store_to: {nxt}" if nxt else ""
        levels.append(f"""  - level: L{level}
    upstream throughput: [32 B/cy, half-duplex]
    cache per group: {{sets: {c['sets']}, ways: {c['ways']}, cl_size: {c['line_bytes']}, replacement_policy: LRU, write_allocate: true, write_back: true{links}}}
    size per group: {c['size_bytes'] / 1024:.2f} kB
    groups: {max(1, machine['cores'] // c['shared_by'])}
    cores per group: {c['shared_by']}
    threads per group: {c['shared_by']}
    transfers overlap: false""")
    measurements = "".join(f"""    {level}:
      1:
        threads per core: 1
        cores: [1]
        results:
          load: [{gb:.3f} GB/s]
        size per core: [{LEVELS[level] * 16 / 1024:.2f} kB]
        total size: [{LEVELS[level] * 16 / 1024:.2f} kB]
""" for level, gb in bandwidth.items() if level == "MEM" or int(level[1:]) in caches)
    dp = machine["peak_flops_per_cycle"]["dp"]
    text = f"""kerncraft version: 0.8.5
model type: {machine['model']}
model name: {machine['model']}
clock: {machine['nominal_hz'] / 1e9:.4f} GHz
sockets: 1
cores per socket: {machine['cores']}
threads per core: 1
NUMA domains per socket: 1
cores per NUMA domain: {machine['cores']}
cacheline size: 64 B
FLOPs per cycle:
  SP: {{total: {2 * dp}, FMA: {2 * dp}, ADD: {dp}, MUL: {dp}}}
  DP: {{total: {dp}, FMA: {dp}, ADD: {dp // 2}, MUL: {dp // 2}}}
in-core model: !!omap
  - OSACA: ZEN3
compiler: !!omap
  - gcc: -O3 -mavx2 -mfma
memory hierarchy:
{chr(10).join(levels)}
  - level: MEM
    upstream throughput: [full socket memory bandwidth, half-duplex]
    cores per group: {machine['cores']}
    threads per group: {machine['cores']}
benchmarks:
  kernels:
    load:
      FLOPs per iteration: 2
      read streams: {{bytes: 16.00 B, streams: 2}}
      read+write streams: {{bytes: 8.00 B, streams: 1}}
      write streams: {{bytes: 8.00 B, streams: 1}}
  measurements:
{measurements}"""
    with open(path, "w") as f:
        f.write(text)


def kerncraft_kernel(args, path):
    """The kernel as a kerncraft kernel file, and its -D defines."""
    if args[0] == "base":
        _, k, n = args
        expr = "a[i]"
        for _ in range(k):
            expr = f"({expr} * c[i] + z)"
        text = f"double a[N], c[N];\ndouble z;\nfor (int i = 0; i < N; ++i)\n    a[i] = {expr};\n"
        defines = ["-D", "N", str(n)]
    else:
        _, r, extra = args
        at = lambda d: f"c[k][j{d:+d}][i]" if d else "c[k][j][i]"
        expr = f"{at(-1)} * {at(0)} + {at(1)}"
        for d in range(2, r + 1):
            expr = f"({expr}) * {at(d)} + {at(-d)}"
        for _ in range(extra):
            expr = f"({expr}) * {at(0)} + z"
        text = (f"double a[N3][N2][N1], c[N3][N2][N1];\ndouble z;\n"
                f"for (int k = 0; k < N3; ++k)\n  for (int j = {r}; j < N2 - {r}; ++j)\n"
                f"    for (int i = 0; i < N1; ++i)\n      a[k][j][i] = {expr};\n")
        defines = ["-D", "N1", "2016", "-D", "N2", "64", "-D", "N3", "64"]
    with open(path, "w") as f:
        f.write(text)
    return defines


def kerncraft_predict(binary, machine_file, kernel_file, defines):
    out = run([binary, "-p", "RooflineFLOP", "-P", "LC", "-m", machine_file, kernel_file,
               *defines, "--cores", "1"])
    found = re.search(r"([\d.]+) ([kMG]?)FLOP/s due to (\S+)", out)
    if not found:
        return None, "?"
    scale = {"": 1e-9, "k": 1e-6, "M": 1e-3, "G": 1.0}[found.group(2)]
    return float(found.group(1)) * scale, found.group(3)


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
    # The best of L1 and L2 at b/f 0.375: on a shared machine a single run is often depressed.
    peff = min(max(measure(kernels, "base", 32, LEVELS[l]) for l in ("L1", "L2")), peak)
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
    kerncraft = kerncraft_binary()
    machine_file = os.path.join(tmp, "machine.yml")
    kerncraft_machine(machine, bandwidth, machine_file)
    rows = []
    print(f"\n{'kernel':<24}{'counts':<24}{'measured':>9}{'extended':>9}{'err':>8}"
          f"{'classic':>9}{'err':>8}{'kerncraft':>10}{'err':>8}  limit (kerncraft)")
    for index, (name, counts, args, cached) in enumerate(cases):
        measured = measure(kernels, *args)
        out = json.loads(run([loopscope, "roofline", "--counts", counts, "--bandwidth", bw_flag,
                              "--peak-gflops", f"{peak:.4f}", "--effective-gflops",
                              f"{peff:.4f}", "--json"]))
        ext = out["prediction"]["gflops"]
        cls = out["classic"]["gflops"]
        e_ext = (ext - measured) / measured
        e_cls = (cls - measured) / measured
        kernel_file = os.path.join(tmp, f"kernel{index}.c")
        kc, kc_limit = kerncraft_predict(kerncraft, machine_file, kernel_file,
                                         kerncraft_kernel(args, kernel_file))
        e_kc = None if kc is None or kc_limit == "CPU" else (kc - measured) / measured
        rows.append((e_ext, e_cls, cached, e_kc))
        kc_text = f"{kc:10.2f}" if kc is not None else f"{'-':>10}"
        e_kc_text = f"{100 * e_kc:+7.1f}%" if e_kc is not None else f"{'n/a':>8}"
        print(f"{name:<24}{counts:<24}{measured:9.2f}{ext:9.2f}{100 * e_ext:+7.1f}%"
              f"{cls:9.2f}{100 * e_cls:+7.1f}%{kc_text}{e_kc_text}  "
              f"{out['prediction']['limit']} ({kc_limit})")

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
    kc_rows = [r[3] for r in rows if r[3] is not None]
    if kc_rows:
        print(f"median |error|, kerncraft RooflineFLOP on the {len(kc_rows)} kernels it does not "
              f"call CPU-bound: {100 * med(kc_rows):.1f} % (extended on the same: "
              f"{100 * med(r[0] for r in rows if r[3] is not None):.1f} %)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
