#!/usr/bin/env python3
"""Coverage of the analytic miss model: which sizes it models within the time limit, how long it
takes, and whether its counts equal the exact simulator's.

For each example kernel with a parameter N (examples/kernels/*.c), every value of N in a range
(not only round numbers: conflicts depend on N modulo the sets), runs

    loopscope misses KERNEL -D N=n [-D M=...] --cache HIERARCHY --model-only --check --json \
        --time-limit LIMIT

for two hierarchies: a 32 KiB 8-way L1 / 1 MiB 16-way L2 / 32 MiB 16-way L3 (64-byte lines) and
this machine's data caches (`loopscope machine --json`). `--model-only` keeps levels the model
does not finish missing (rather than simulated), so that they count against coverage;
`--check` simulates each level alone, the model's assumption, and compares every reference.
Prints, per hierarchy and overall: the share of (kernel, N, level) modelled within the limit,
the median and largest model time of a level (`duration_s`: the level process's time when the
level was done), the (kernel, N, level) not modelled, and any modelled count that differs from
the simulator's.

Default (7.5 minutes on the 2-core AMD EPYC guest): matmul.c and transpose.c, N = 8..100, limit 2 s.
Environment:
  FULL=1           every kernel with N, N = 2..400 (hours: matmul's simulation alone at N = 400
                   is 2.6e8 accesses per level)
  KERNELS=a.c,b.c  these kernel files (of examples/kernels)
  NS=lo..hi[:step] these values of N
  LIMIT=seconds    --time-limit (default 2, the goal per level)
  HIERARCHIES=fixed,machine   which hierarchies (default both)
  LOOPSCOPE=path   the binary to run (default: built with cargo build --release)
Kernels with a second parameter get a fixed value for it: M = 20 for the stencils (rows of the
2D stencil, planes of the 3D one), M = 64 for the column walk (stride-conflict.c).
"""
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KERNELS_DIR = os.path.join(ROOT, "examples", "kernels")
FIXED = "L1=32K:8:64,L2=1M:16:64,L3=32M:16:64"
OTHER_PARAMS = {"2d-5pt.c": ["M=20"], "3d-7pt.c": ["M=20"], "stride-conflict.c": ["M=64"]}
DEFAULT_KERNELS = ["matmul.c", "transpose.c"]


def parse_range(text):
    span, _, step = text.partition(":")
    lo, _, hi = span.partition("..")
    return range(int(lo), int(hi) + 1, int(step or 1))


def kernels_with_n():
    names = []
    for name in sorted(os.listdir(KERNELS_DIR)):
        if not name.endswith(".c"):
            continue
        text = open(os.path.join(KERNELS_DIR, name)).read()
        code = "\n".join(l for l in text.splitlines() if not l.lstrip().startswith("//"))
        if "[N]" in code or "<N" in code.replace(" ", ""):
            names.append(name)
    return names


def binary():
    if os.environ.get("LOOPSCOPE"):
        return os.environ["LOOPSCOPE"]
    subprocess.run(["cargo", "build", "-q", "--release", "-p", "loopscope"], check=True, cwd=ROOT)
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
    return os.path.join(target, "release", "loopscope")


def machine_spec(loopscope):
    """This machine's data and unified caches as a --cache spec (the levels misses models)."""
    out = subprocess.run([loopscope, "machine", "--json"], capture_output=True, text=True, check=True)
    caches = [c for c in json.loads(out.stdout)["caches"] if c["kind"] in ("data", "unified")]
    caches.sort(key=lambda c: c["level"])
    return ",".join(f"L{c['level']}={c['size_bytes']}:{c['ways']}:{c['line_bytes']}" for c in caches)


def run_one(loopscope, kernel, n, spec, limit):
    args = [loopscope, "-q", "misses", os.path.join(KERNELS_DIR, kernel), "-D", f"N={n}"]
    for d in OTHER_PARAMS.get(kernel, []):
        args += ["-D", d]
    args += ["--cache", spec, "--model-only", "--check", "--json", "--time-limit", str(limit)]
    out = subprocess.run(args, capture_output=True, text=True)
    if not out.stdout.strip():
        # No level modelled: exit 1 and no document. Count every level as not modelled.
        return None, out.stderr.strip().splitlines()[-1:] or [""]
    return json.loads(out.stdout), None


def main():
    full = os.environ.get("FULL") == "1"
    kernels = os.environ.get("KERNELS")
    kernels = kernels.split(",") if kernels else (kernels_with_n() if full else DEFAULT_KERNELS)
    ns = parse_range(os.environ.get("NS", "2..400" if full else "8..100"))
    limit = float(os.environ.get("LIMIT", "2"))
    loopscope = binary()
    hierarchies = {"fixed": FIXED, "machine": machine_spec(loopscope)}
    chosen = os.environ.get("HIERARCHIES", "fixed,machine").split(",")
    model = subprocess.run(["grep", "-m1", "model name", "/proc/cpuinfo"], capture_output=True,
                           text=True).stdout.split(":")[-1].strip()
    print(f"# misses coverage on {model} ({os.cpu_count()} cores), --time-limit {limit}")
    print(f"# kernels {','.join(kernels)}; N = {ns.start}..{ns.stop - 1} step {ns.step}")
    totals = {"cells": 0, "modelled": 0, "times": [], "differ": []}
    started = time.time()
    for name in chosen:
        spec = hierarchies[name]
        cells, modelled, times, missing, differ = 0, 0, [], [], []
        for kernel in kernels:
            levels = spec.count("=")
            for n in ns:
                doc, why = run_one(loopscope, kernel, n, spec, limit)
                cells += levels
                if doc is None:
                    missing += [(kernel, n, f"all levels: {why[0]}")]
                    continue
                for lvl, check in zip(doc["levels"], doc["check"]["levels"]):
                    if lvl["method"] != "model":
                        missing.append((kernel, n, f"{lvl['name']}: {lvl['error']}"))
                        continue
                    modelled += 1
                    times.append((lvl["duration_s"], kernel, n, lvl["name"]))
                    if lvl["misses"] != check["misses"]:
                        differ.append((kernel, n, lvl["name"], lvl["misses"], check["misses"]))
                for r in doc["check"]["references"]:
                    if r["difference"] not in (None, 0):
                        differ.append((kernel, n, r["level"], f"reference {r['id']}", r["difference"]))
        report(name, spec, cells, modelled, times, missing, differ)
        totals["cells"] += cells
        totals["modelled"] += modelled
        totals["times"] += times
        totals["differ"] += differ
    if len(chosen) > 1:
        t = sorted(x[0] for x in totals["times"])
        print(f"\noverall: {totals['modelled']}/{totals['cells']} levels modelled "
              f"({100 * totals['modelled'] / max(totals['cells'], 1):.1f} %), "
              f"median {statistics.median(t) if t else 0:.3f} s, largest {max(t) if t else 0:.3f} s, "
              f"{len(totals['differ'])} counts differ from the simulator")
    print(f"# {time.time() - started:.0f} s")


def report(name, spec, cells, modelled, times, missing, differ):
    print(f"\n{name} hierarchy {spec}:")
    share = 100 * modelled / max(cells, 1)
    print(f"  modelled within the limit: {modelled}/{cells} (kernel, N, level) = {share:.1f} %")
    if times:
        t = sorted(times)
        worst = t[-1]
        print(f"  model time per level: median {statistics.median(x[0] for x in t):.3f} s, "
              f"largest {worst[0]:.3f} s ({worst[1]} N={worst[2]} {worst[3]})")
        slow = [x for x in t if x[0] > 2.0]
        if slow:
            print("  over 2 s: " + ", ".join(f"{k} N={n} {l} {s:.1f} s" for s, k, n, l in slow))
    print(f"  counts equal to the simulator: {'all' if not differ else 'NOT ALL'} "
          f"({modelled} levels checked per reference)")
    for d in differ:
        print(f"    differs: {d}")
    for kernel, n, why in missing:
        print(f"  not modelled: {kernel} N={n} {why}")


if __name__ == "__main__":
    sys.exit(main())
