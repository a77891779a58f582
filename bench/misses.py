#!/usr/bin/env python3
"""Analytic misses (spec 000) against the exact simulator and kerncraft's layer conditions,
side by side in one run.

For each kernel and three sizes (working set in L1, in L2, beyond L3 of this machine), runs
`loopscope misses --check --json` on this machine's data caches: the model (the levels of one
line size in one process, so its wall time is that of the level done last) and the simulator (each level alone, the model's
assumption) count every reference's misses; prints the model's time, the simulator's time, their
ratio and whether every count is equal. A level the model cannot do within its limits is shown
as `-` (see the README's limits). Beside them, `simulate s`: `loopscope simulate` on the same
kernel and caches (the hierarchy in one pass, no miss split). `sim s` sums the check's levels,
each simulated alone counting compulsory misses by first touch, so it should stay near the
number of levels times `simulate s`.

Then kerncraft's layer-condition predictor (`kerncraft -p LC`, 0.8.18 from PyPI in bench/.venv,
made on first run) on the same kernel files, sizes and caches (a kerncraft machine file written
from `loopscope machine --json`, as bench/roofline.py does), per level: the simulator's misses,
loopscope's, and LC's with its error, plus each tool's time. Last, the conflict case: the 2D
stencil with power-of-two rows in an 8 KiB 2-way L1 (both tools given that cache), where most
misses are conflicts that layer conditions, which only compare sizes, cannot see; a row length
of 1000 beside it shows the same LC prediction where the conflicts are gone.

Converting LC's output to misses. For each cache level kerncraft lists layer conditions, each a
condition on the kernel's constants with `misses`, `hits` and `evicts`: the number of the
kernel's access streams (distinct reuse distances, write-allocated destinations included) that
miss, hit, or are written back, per iteration of the innermost loop. The first condition that
holds at the -D values applies (kerncraft's own `desymbolize`). A missing stream walks its array
one element per iteration, so it brings in one cache line every line/element iterations: kerncraft
itself counts cache lines per unit of work (one line's worth of iterations) with exactly these
numbers (its ECM model multiplies `misses` by elements per cache line times element size to get
bytes per unit of work). The total misses of a level are therefore

    misses_per_iteration x innermost iterations x element bytes / line bytes

with the innermost iterations the product of the loops' trip counts (the nests LC accepts are
perfect and rectangular) and the element size from the kernel's declarations. These are line fills,
what the simulator and loopscope count as misses. LC's write-backs (`evicts`) are not compared.
LC describes the steady state of a kernel run again and again: where every array fits in a level
(its first condition) it predicts 0 misses, while the single cold run that the simulator and
loopscope count has its compulsory misses there. Those rows are marked `(all fit: warm)` and their
errors are summarised apart from the others.

Times: loopscope's is the model's own (`duration_s` of its slowest level); kerncraft's is the
wall time of the `kerncraft` command on a fresh copy of the kernel (kerncraft caches its
symbolic analysis next to the kernel file, which would make repeated runs look faster), and
includes Python's start-up, printed separately (`kerncraft --version`). Kerncraft refuses
kernels whose subscripts do not follow the loop order (matmul, transpose, the column walk),
loop conditions other than `<` (triangular) and imperfect nests; the reason is printed and the
run continues. Run: `bench/misses.py` (builds loopscope in release mode; the matmul sizes make it
take about half an hour on this shared machine); `ONLY=triad.c,2d-5pt.c bench/misses.py` runs
only the named kernel files (the conflict case always runs); `SIZES=0,1` runs only the sizes of
those indices (0: in L1, 1: in L2, 2: beyond L3), e.g. the matrix multiplies without the size
whose simulation (with its compulsory/capacity/conflict split, three levels at once) takes
14 minutes per kernel. `EXTRA="matmul.c N=90;3d-7pt.c M=20 N=60"` adds sizes between those
(each a kernel file and its -D values, separated by `;`), after the chosen ones: the README's
sweep of such sizes, reproduced with `SIZES= EXTRA=...`.
"""
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KERNELS = os.path.join(ROOT, "examples", "kernels")
sys.path.insert(0, os.path.join(ROOT, "bench"))
import roofline as kerncraft_helpers  # noqa: E402  (the venv and the machine file)

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
# The conflict case: (kernel, defines, cache) run by both tools on that one cache level.
CONFLICT_CASES = [
    ("2d-5pt.c", ["M=12", "N=1024"], "L1=8K:2:64"),
    ("2d-5pt.c", ["M=12", "N=1000"], "L1=8K:2:64"),
]


def run_loopscope(loopscope, kernel, defines, cache=None):
    args = [loopscope, "misses", os.path.join(KERNELS, kernel), "--check", "--json", "-q",
            "--time-limit", os.environ.get("TIME_LIMIT", "30")]
    if cache:
        args += ["--cache", cache]
    for d in defines:
        args += ["-D", d]
    out = subprocess.run(args, capture_output=True, text=True)
    if out.returncode not in (0, 1) or not out.stdout:
        return None, out.stderr.strip().splitlines()[-1:] or ["?"]
    return json.loads(out.stdout), []


def simulate_seconds(loopscope, kernel, defines):
    """`loopscope simulate`'s own time (duration_s) on the same kernel and caches, or None."""
    args = [loopscope, "simulate", os.path.join(KERNELS, kernel), "--json", "-q"]
    for d in defines:
        args += ["-D", d]
    out = subprocess.run(args, capture_output=True, text=True)
    if out.returncode != 0 or not out.stdout:
        return None
    return json.loads(out.stdout)["duration_s"]


def element_bytes(kernel):
    """The arrays' element size (kerncraft's LC assumes one datatype per kernel)."""
    with open(os.path.join(KERNELS, kernel)) as f:
        found = re.search(r"^\s*(double|float|int|long)\b", f.read(), re.M)
    return {"double": 8, "long": 8, "float": 4, "int": 4}[found.group(1) if found else "double"]


def innermost_iterations(kernel, values):
    """Executions of the innermost loop body of a perfect nest of `for (int v = lo; v < hi; ...)`
    loops with bounds in the -D constants (the kernels layer conditions accept), or None."""
    with open(os.path.join(KERNELS, kernel)) as f:
        loops = re.findall(r"for\s*\(\s*int\s+\w+\s*=\s*([^;]+);\s*\w+\s*<\s*([^;]+);", f.read())
    total = 1
    for lo, hi in loops:
        try:
            trips = eval(hi, {"__builtins__": {}}, dict(values)) - eval(lo, {"__builtins__": {}},
                                                                       dict(values))
        except Exception:  # a bound in an outer loop variable: not a rectangular nest
            return None
        total *= max(0, trips)
    return total if loops else None


def holds(condition, values):
    """Whether a layer condition (sympy text over the kernel's constants) holds at `values`."""
    if isinstance(condition, bool):
        return condition
    text = str(condition).replace("&", " and ").replace("|", " or ")
    return bool(eval(text, {"__builtins__": {}, "Max": max, "Min": min, "oo": float("inf"),
                            "True": True, "False": False}, dict(values)))


def run_kerncraft(binary, machine_file, kernel, defines):
    """`kerncraft -p LC` on a fresh copy of the kernel: per level the LC row that holds, and the
    wall time; or None and kerncraft's reason."""
    tmp = tempfile.mkdtemp()
    try:
        copy = os.path.join(tmp, kernel)
        shutil.copy(os.path.join(KERNELS, kernel), copy)
        result = os.path.join(tmp, "lc.json")
        args = [binary, "-p", "LC", "-m", machine_file, copy, "--cores", "1", "--json", result]
        for d in defines:
            name, value = d.split("=")
            args += ["-D", name, value]
        start = time.perf_counter()
        out = subprocess.run(args, capture_output=True, text=True, cwd=tmp)
        wall = time.perf_counter() - start
        if out.returncode != 0 or not os.path.exists(result):
            lines = (out.stderr or out.stdout).strip().splitlines()
            reason = next((l for l in reversed(lines) if "Error" in l), lines[-1] if lines else "?")
            return None, wall, reason.strip()
        with open(result) as f:
            data = next(iter(json.load(f).values()))
        values = {d.split("=")[0]: int(d.split("=")[1]) for d in defines}
        rows = []
        for options in data["cache"]:
            row = dict(next((o for o in options if holds(o["condition"], values)), options[-1]))
            # The first option is "every array fits in this level": 0 misses, a warm cache.
            row["fits"] = row == options[0] and row["misses"] == 0
            rows.append(row)
        return rows, wall, None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def lc_misses(row, iterations, elem, line):
    """Total line fills of one level from an LC row (see the module docstring)."""
    return row["misses"] * iterations * elem / line


def one_level_machine(machine, cache):
    """The machine JSON with its data caches replaced by one `NAME=SIZE:WAYS:LINE` level."""
    name, spec = cache.split("=")
    size, ways, line = spec.split(":")
    size = int(size[:-1]) * 1024 if size.endswith("K") else int(size)
    ways, line = int(ways), int(line)
    m = dict(machine)
    m["caches"] = [{"level": int(name[1:]), "kind": "data", "size_bytes": size, "ways": ways,
                    "line_bytes": line, "sets": size // (ways * line), "shared_by": 1}]
    return m


def compare(report, kc_binary, machine_file, kernel, defines):
    """One kernel and size (loopscope's report already made): rows (level, sim, model, LC) and
    the two times; prints them."""
    label = ",".join(defines)
    rows, kc_s, reason = run_kerncraft(kc_binary, machine_file, kernel, defines)
    model_s = max(l["duration_s"] for l in report["levels"])
    # From the loop bounds: loopscope lists no references when no level was modelled.
    values = {d.split("=")[0]: int(d.split("=")[1]) for d in defines}
    iterations = innermost_iterations(kernel, values)
    if iterations is None:
        iterations = max((r["accesses"] for r in report["references"]), default=0)
    elem = element_bytes(kernel)
    out = []
    for k, (level, sim) in enumerate(zip(report["levels"], report["check"]["levels"])):
        model = level["misses"]
        lc = None
        if rows is not None and k < len(rows):
            lc = lc_misses(rows[k], iterations, elem, level["line_bytes"])
        err_text = "-"
        if lc is not None and sim["misses"]:
            err_text = f"{100 * (lc - sim['misses']) / sim['misses']:+.1f}%"
        elif lc is not None:
            err_text = "exact" if lc == 0 else "n/a"
        cond = str(rows[k]["condition"]) if lc is not None else ""
        if lc is not None and rows[k]["fits"]:
            cond += " (all fit: warm)"
        first = k == 0
        times = (f"{model_s:>8.3f}{kc_s:>8.2f}" if first and rows is not None
                 else f"{model_s:>8.3f}{'-':>8}" if first else f"{'':>16}")
        print(f"{kernel if first else '':<18}{label if first else '':<16}{times}  "
              f"{level['name']:<4}{sim['misses']:>11}{'-' if model is None else model:>11}"
              f"{'-' if lc is None else f'{lc:.0f}':>11}{err_text:>9}  {cond[:44]}")
        out.append((level["name"], sim["misses"], model, lc,
                    lc is not None and rows[k]["fits"]))
    if rows is None:
        print(f"{'':<34}kerncraft LC refused it: {reason[:100]}")
    return out, model_s, (kc_s if rows is not None else None)


def main():
    subprocess.run(["cargo", "build", "-q", "--release", "-p", "loopscope"], check=True, cwd=ROOT)
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
    loopscope = os.path.join(target, "release", "loopscope")
    print(f"load average {os.getloadavg()[0]:.2f}")

    # Part 1: the model against the simulator.
    print(f"{'kernel':<18}{'size':<20}{'model s':>9}{'sim s':>9}{'sim/model':>10}"
          f"{'simulate s':>11}  {'levels modelled':<16}{'equal':<6}")
    equal_all, modelled, total = True, 0, 0
    model_times = []
    reports = []
    only = [k for k in os.environ.get("ONLY", "").split(",") if k]
    # SIZES=0,1 keeps the L1 and L2 sizes (the simulator needs hours for matmul beyond L3).
    size_indices = [int(i) for i in os.environ.get("SIZES", "0,1,2").split(",") if i]
    chosen = [(kernel, sizes[i]) for kernel, *sizes in CASES if not only or kernel in only
              for i in size_indices if i < len(sizes)]
    extra = [e.split() for e in os.environ.get("EXTRA", "").split(";") if e.strip()]
    chosen += [(words[0], words[1:]) for words in extra]
    for kernel, defines in chosen:
        report, err = run_loopscope(loopscope, kernel, defines)
        reports.append((kernel, defines, report))
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
        whole_s = simulate_seconds(loopscope, kernel, defines)
        whole = "-" if whole_s is None else f"{whole_s:.3f}"
        print(f"{kernel:<18}{label:<20}{model_s:>9.3f}{sim_s:>9.3f}{sim_s / model_s:>10.2f}"
              f"{whole:>11}  {names:<16}{str(report['check']['equal']).lower():<6}")
    model_times.sort()
    print(f"\nlevels modelled {modelled}/{total}; every modelled count equal to the simulator: "
          f"{str(equal_all).lower()}; model time median {model_times[len(model_times) // 2]:.2f} s,"
          f" max {model_times[-1]:.2f} s (`-` after a level: not modelled within the limits)")

    # Part 2: kerncraft's layer conditions on the same files, sizes and caches.
    kc_binary = kerncraft_helpers.kerncraft_binary()
    start = time.perf_counter()
    subprocess.run([kc_binary, "--version"], capture_output=True, check=True)
    startup_s = time.perf_counter() - start
    machine = json.loads(subprocess.run([loopscope, "machine", "--json"], check=True,
                                        capture_output=True, text=True).stdout)
    tmp = tempfile.mkdtemp()
    machine_file = os.path.join(tmp, "machine.yml")
    # LC uses only the cache sizes; the bandwidths are placeholders the file format requires.
    placeholder = {"L1": 100.0, "L2": 50.0, "L3": 20.0, "MEM": 10.0}
    kerncraft_helpers.kerncraft_machine(machine, placeholder, machine_file)
    header = (f"{'kernel':<18}{'size':<16}{'model s':>8}{'LC s':>8}  {'lvl':<4}{'sim':>11}"
              f"{'loopscope':>11}{'LC':>11}{'LC err':>9}  LC condition")
    print(f"\nkerncraft 0.8.18 -p LC (wall, including {startup_s:.2f} s of Python start-up) vs "
          f"loopscope's model time; misses per level (loopscope: `-` = not modelled)")
    print(header)
    lc_errors, warm_errors, conflict_errors, speedups, model_exact = [], [], [], [], True
    for kernel, defines, report in reports:
        if report is not None:
            rows, model_s, kc_s = compare(report, kc_binary, machine_file, kernel, defines)
            if kc_s is not None:
                speedups.append(kc_s / model_s)
                for _, sim, _, lc, fits in rows:
                    if lc is not None and sim:
                        (warm_errors if fits else lc_errors).append(abs(lc - sim) / sim)
            model_exact &= all(m is None or m == sim for _, sim, m, _, _ in rows)

    print("\nthe conflict case (both tools given one small cache level)")
    print(header)
    for kernel, defines, cache in CONFLICT_CASES:
        small = os.path.join(tmp, f"machine-{cache.replace('=', '-').replace(':', '-')}.yml")
        kerncraft_helpers.kerncraft_machine(one_level_machine(machine, cache),
                                            {"L1": 100.0, "MEM": 10.0}, small)
        report, err = run_loopscope(loopscope, kernel, defines, cache)
        if report is None:
            print(f"{kernel:<18}{','.join(defines):<16}  loopscope failed: {err[0][:80]}")
        else:
            rows, model_s, kc_s = compare(report, kc_binary, small, kernel, defines)
            model_exact &= all(m is None or m == sim for _, sim, m, _, _ in rows)
            if kc_s is not None:
                speedups.append(kc_s / model_s)
                conflict_errors += [(lc - sim) / sim for _, sim, _, lc, _ in rows
                                    if lc is not None and sim]
    shutil.rmtree(tmp, ignore_errors=True)
    med = lambda xs: 100 * statistics.median(xs) if xs else float("nan")
    print(f"\nLC median |error| {med(lc_errors):.1f} % over the {len(lc_errors)} levels where the "
          f"working set does not fit (max {100 * max(lc_errors, default=0):.1f} %), "
          f"{med(warm_errors):.1f} % over the {len(warm_errors)} where it fits (LC assumes a warm "
          f"cache: 0 misses, a single run has its compulsory ones); conflict case "
          + ", ".join(f"{100 * e:+.1f} %" for e in conflict_errors)
          + f"\nloopscope equal to the simulator wherever modelled: {str(model_exact).lower()}; "
          f"LC time / loopscope model time: median {statistics.median(speedups):.2f}x "
          f"(min {min(speedups):.2f}x, max {max(speedups):.2f}x; below 1: LC faster)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
