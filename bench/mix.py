#!/usr/bin/env python3
"""loopscope mix beside exact counts and valgrind callgrind, on five programs in one run.

For each program of bench/mix/ (FP-heavy, integer-heavy, memory-bound, branchy, mixed), all
built with `cc -O1 -g -no-pie` (fixed addresses, so callgrind's instruction addresses are the
binary's own):

- exact reference: every program repeats one fixed workload REPS times (argv[1]), so each block's
  executions are affine in REPS. callgrind's per-instruction counts at S and 2S repetitions give
  them exactly at any REPS; `loopscope record --exact` at S must agree with callgrind at S (the
  `exact/cg` column: largest difference over the types, in instructions);
- estimate: `loopscope record` (sample back-end, 1 kHz; cpu-clock where there are no hardware
  counters) at L repetitions (about a second), then `loopscope mix --json`; its per-type counts
  and shares against the reference at L;
- overhead: the sampled run's wall time (the target's, exec to exit) against the program alone,
  and the CPU time of `loopscope record` with its target against the program's alone (user +
  system; best of 3 each, interleaved);
- callgrind's slowdown at L/10 repetitions (best of 3 native runs).

Counts are those of the executable's own code (libc is outside both the exact back-end's window
and the comparison). Per-type errors are shown for types above 5 % of the instructions, the
goal being 10 % for the cpu-clock estimate. The `model` line is the spread of the time-based
estimate's per-block N1 over the reference (hot blocks, sampling noise removed), the figure
behind the estimate's per-block model error.

Usage: bench/mix.py [--loopscope PATH] [--only NAME,...]
"""
import argparse
import json
import math
import os
import re
import resource
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TYPES = ["fp", "simd", "ls", "br", "int"]

# name: (exact repetitions S, sampled repetitions L)
PROGRAMS = {
    "fp": (20, 60000),
    "int": (20, 20000),
    "mem": (10, 300),
    "branchy": (3, 8000),
    "mixed": (8, 50000),
}


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)


def timed(cmd):
    """Wall seconds and CPU seconds (user + system, the command and every descendant)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def block_map(loopscope, binary):
    """Every block of the binary: start -> (instructions, {type: count})."""
    loops = json.loads(run([loopscope, "loops", binary, "--json"]).stdout)
    blocks = {}
    for f in loops["functions"]:
        out = json.loads(run([loopscope, "blocks", binary, "--function", hex(f["address"]), "--json"]).stdout)
        for b in out["blocks"]:
            c, t = b["classes"], b["tags"]
            counts = dict(c)
            counts["simd"] = t["simd128"] + t["simd256"] + t["simd512"]
            blocks[b["start"]] = (b["instructions"], counts)
    return blocks


def callgrind_counts(binary, reps, out):
    """Executions of each instruction address of the binary itself."""
    subprocess.run(
        ["valgrind", "--tool=callgrind", "--dump-instr=yes", "--compress-pos=no",
         "--compress-strings=no", f"--callgrind-out-file={out}", binary, str(reps)],
        check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    counts, ours, skip = {}, False, False
    name = os.path.realpath(binary)
    for line in open(out):
        if line.startswith("ob="):
            ours = os.path.realpath(line[3:].strip()) == name
        elif line.startswith("calls="):
            skip = True  # the next cost line is the call's inclusive cost
        elif line.startswith("0x"):
            if skip:
                skip = False
                continue
            if ours:
                fields = line.split()
                address = int(fields[0], 16)
                counts[address] = counts.get(address, 0) + int(fields[-1])
        elif skip and line.strip() and not line[0].isdigit():
            skip = False
    return counts


def reference(blocks, ir):
    """Per-type executions and per-block N1 from per-instruction counts (a block runs as often
    as its first instruction)."""
    totals = {t: 0 for t in TYPES}
    n1 = {}
    for start, (n, counts) in blocks.items():
        e = ir.get(start, 0)
        if e:
            n1[start] = e * n
        for t in TYPES:
            totals[t] += e * counts[t]
    totals["all"] = sum(totals[t] for t in ("fp", "ls", "br", "int"))
    return totals, n1


def profile_wall_s(path):
    with open(path) as f:
        f.readline()
        return json.load(f)["recording"]["wall_ns"] * 1e-9


def mix_json(loopscope, profile, by="function"):
    out = run([loopscope, "mix", profile, "--json", "--by", by, "--types", ",".join(TYPES)])
    return json.loads(out.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--loopscope", default=os.environ.get("LOOPSCOPE", os.path.join(ROOT, "target/release/loopscope")))
    ap.add_argument("--only", default="")
    args = ap.parse_args()
    ls = args.loopscope
    only = [p for p in args.only.split(",") if p]
    cpu = re.search(r'"model":\s*"([^"]*)"', run([ls, "machine", "--json"]).stdout)
    print(f"machine: {cpu.group(1) if cpu else 'unknown'}; loopscope: {ls}")
    print(f"{'program':8} {'type':5} {'exact@L':>14} {'estimate':>14} {'±1σ':>12} {'err':>7} "
          f"{'share':>7} {'est.sh':>7} {'exact/cg@S':>10}")
    summary = []
    model_logs = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, (small, large) in PROGRAMS.items():
            if only and name not in only:
                continue
            binary = os.path.join(tmp, name)
            run(["cc", "-O1", "-g", "-no-pie", os.path.join(ROOT, "bench/mix", name + ".c"), "-o", binary])
            blocks = block_map(ls, binary)
            cg1 = callgrind_counts(binary, small, os.path.join(tmp, "cg1"))
            cg2 = callgrind_counts(binary, 2 * small, os.path.join(tmp, "cg2"))
            ref_small, _ = reference(blocks, cg1)
            at_large = {a: cg1.get(a, 0) + (cg2.get(a, 0) - cg1.get(a, 0)) * (large - small) // small
                        for a in set(cg1) | set(cg2)}
            ref, ref_n1 = reference(blocks, at_large)
            exact_profile = os.path.join(tmp, name + ".exact")
            run([ls, "record", "--exact", "-q", "-o", exact_profile, "--", binary, str(small)])
            exact = mix_json(ls, exact_profile)
            exact_vs_cg = max(abs(exact["types"][t] - ref_small[t]) for t in TYPES)
            native, sampled, native_cpu, sampled_cpu = [], [], [], []
            sampled_profile = os.path.join(tmp, name + ".profile")
            for _ in range(3):
                wall, cpu = timed([binary, str(large)])
                native.append(wall)
                native_cpu.append(cpu)
                _, cpu = timed([ls, "record", "-q", "-o", sampled_profile, "--", binary, str(large)])
                sampled.append(profile_wall_s(sampled_profile))
                sampled_cpu.append(cpu)
            est = mix_json(ls, sampled_profile)
            blocks_est = mix_json(ls, sampled_profile, by="block")
            logs = []
            for row in blocks_est["by"]:
                truth = ref_n1.get(row["address"], 0)
                if row["samples"] >= 20 and truth > 0 and row["instructions"] > 0:
                    # Log ratio minus the sampling noise of this block's samples.
                    logs.append((math.log(row["instructions"] / truth), 1.0 / row["samples"]))
            model_logs.append((name, logs))
            medium = max(1, large // 10)
            cg_native = min(timed([binary, str(medium)])[0] for _ in range(3))
            cg_time = timed(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", binary, str(medium)])[0]
            errors = []
            for t in TYPES:
                detail = next(d for d in est["type_details"] if d["type"] == t)
                share = ref[t] / ref["all"] if ref["all"] else 0.0
                err = (detail["count"] - ref[t]) / ref[t] if ref[t] else 0.0
                if share > 0.05:
                    errors.append(abs(err))
                print(f"{name:8} {t:5} {ref[t]:>14,} {detail['count']:>14,} {detail['error']:>12,.0f} "
                      f"{err * 100:>6.1f}% {share * 100:>6.1f}% {detail['share'] * 100:>6.1f}% "
                      f"{exact_vs_cg if t == 'fp' else '':>10}")
            total_err = (est["total_instructions"] - ref["all"]) / ref["all"]
            overhead = min(sampled) / min(native) - 1
            cpu_overhead = min(sampled_cpu) / min(native_cpu) - 1
            share_errors = [abs(next(d for d in est["type_details"] if d["type"] == t)["share"] * ref["all"] / ref[t] - 1)
                            for t in TYPES if ref["all"] and ref[t] / ref["all"] > 0.05]
            summary.append((name, est["event"], est["samples"], max(errors), max(share_errors), total_err,
                            overhead, cpu_overhead, min(native), cg_time / cg_native))
    print()
    print(f"{'program':8} {'event':10} {'samples':>7} {'count err':>9} {'share err':>9} {'total err':>9} "
          f"{'wall ovh':>8} {'cpu ovh':>8} {'native s':>8} {'callgrind':>9} {'model':>6}")
    spreads = {}
    for name, logs in model_logs:
        if logs:
            spread = sum(l * l - noise for l, noise in logs) / len(logs)
            spreads[name] = f"{math.sqrt(max(spread, 0.0)) * 100:.0f}%"
    for name, event, samples, max_err, share_err, total_err, overhead, cpu_overhead, native, slowdown in summary:
        print(f"{name:8} {event:10} {samples:>7} {max_err * 100:>8.1f}% {share_err * 100:>8.1f}% "
              f"{total_err * 100:>8.1f}% {overhead * 100:>7.1f}% {cpu_overhead * 100:>7.1f}% {native:>8.2f} "
              f"{slowdown:>8.1f}x {spreads.get(name, '-'):>6}")
    print("count err, share err: the largest relative error over the types above 5 % of the "
          "instructions; model: spread of estimated over exact N1 per hot block (20 samples or "
          "more), sampling noise removed")


if __name__ == "__main__":
    sys.exit(main())
