#!/usr/bin/env python3
"""Analytic misses (spec 000) against the exact simulator, side by side in one run.

For each kernel and three sizes (working set in L1, in L2, beyond L3 of this machine), runs
`loopscope misses --check --json` on this machine's data caches: the model (each level in its own
thread, so its wall time is the slowest level's) and the simulator (each level alone, the model's
assumption) count every reference's misses; prints the model's time, the simulator's time, their
ratio and whether every count is equal. A level the model cannot do within its limits is shown
as `-` (see the README's limits). Run: `bench/misses.py` (builds loopscope in release mode).
"""
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KERNELS = os.path.join(ROOT, "examples", "kernels")
# kernel file, then -D sets for working sets in L1 (~24 KiB), L2 (~0.5 MiB), beyond L3 (>40 MiB)
CASES = [
    ("triad.c", ["N=700"], ["N=16000"], ["N=1500000"]),
    ("2d-5pt.c", ["M=32", "N=48"], ["M=180", "N=180"], ["M=1600", "N=1600"]),
    ("3d-7pt.c", ["M=12", "N=12"], ["M=20", "N=40"], ["M=80", "N=300"]),
    ("matmul.c", ["N=30"], ["N=150"], ["N=1300"]),
    ("matmul-ikj.c", ["N=30"], ["N=150"], ["N=1300"]),
    ("transpose.c", ["N=40"], ["N=180"], ["N=1600"]),
    ("triangular.c", ["N=50"], ["N=250"], ["N=2300"]),
    ("stride-conflict.c", ["N=64", "M=32"], ["N=256", "M=256"], ["N=2048", "M=2048"]),
]


def run(loopscope, kernel, defines):
    args = [loopscope, "misses", os.path.join(KERNELS, kernel), "--check", "--json", "-q",
            "--time-limit", os.environ.get("TIME_LIMIT", "30")]
    for d in defines:
        args += ["-D", d]
    t = time.perf_counter()
    out = subprocess.run(args, capture_output=True, text=True)
    wall = time.perf_counter() - t
    if out.returncode not in (0, 1) or not out.stdout:
        return None, wall, out.stderr.strip().splitlines()[-1:] or ["?"]
    return json.loads(out.stdout), wall, []


def main():
    subprocess.run(["cargo", "build", "-q", "--release", "-p", "loopscope"], check=True, cwd=ROOT)
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
    loopscope = os.path.join(target, "release", "loopscope")
    print(f"load average {os.getloadavg()[0]:.2f}")
    print(f"{'kernel':<18}{'size':<20}{'model s':>9}{'sim s':>9}{'sim/model':>10}"
          f"  {'levels modelled':<16}{'equal':<6}")
    equal_all, modelled, total = True, 0, 0
    model_times = []
    for kernel, *sizes in CASES:
        for defines in sizes:
            report, wall, err = run(loopscope, kernel, defines)
            label = ",".join(defines)
            if report is None:
                print(f"{kernel:<18}{label:<20}  failed: {err[0][:80]}")
                continue
            levels = report["levels"]
            ok = [l for l in levels if l["error"] is None]
            model_s = max(l["duration_s"] for l in levels)
            sim_s = sum(l["duration_s"] for l in report["check"]["levels"])
            names = "".join(l["name"][:3] + ("" if l["error"] is None else "-") + " "
                            for l in levels)
            total += len(levels)
            modelled += len(ok)
            equal_all &= report["check"]["equal"]
            model_times.append(model_s)
            print(f"{kernel:<18}{label:<20}{model_s:>9.3f}{sim_s:>9.3f}{sim_s / model_s:>10.2f}"
                  f"  {names:<16}{str(report['check']['equal']).lower():<6}")
    model_times.sort()
    print(f"\nlevels modelled {modelled}/{total}; every modelled count equal to the simulator: "
          f"{str(equal_all).lower()}; model time median {model_times[len(model_times) // 2]:.2f} s,"
          f" max {model_times[-1]:.2f} s (`-` after a level: not modelled within the limits)")


if __name__ == "__main__":
    sys.exit(main())
