#!/usr/bin/env bash
# Benchmark of `loopscope probe` on this machine (not a test; prints figures).
#
# (a) detected L1i, L1d, L2 (and the effective L3) against sysfs over RUNS runs
#     (goal: each of L1i, L1d, L2 within +-12.5 % in every run);
# (b) the instruction-cache sweep by in-place rewriting against the recompile baseline over
#     the same points, the paper's 0 to 40 KB in 400-byte steps (goal: >= 1000x faster);
# (c) total probe time (goal: <= 60 s full, <= 10 s quick).
#
# Usage: bench/probe.sh [RUNS]   (MODE=--quick bench/probe.sh runs the quick probe in (a);
#        KEEP=DIR keeps every run's JSON, curves included, in DIR)
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-5}
MODE=${MODE:-}
BIN=${LOOPSCOPE:-target/release/loopscope}
if [[ ! -x $BIN ]]; then
    cargo build --release -q -p loopscope
fi
OUT=$(mktemp -d)
trap 'if [[ -n ${KEEP:-} ]]; then mkdir -p "$KEEP" && cp "$OUT"/*.json "$KEEP"/; fi; rm -rf "$OUT"' EXIT

echo "machine load before: $(cut -d' ' -f1-3 /proc/loadavg) (timings are noisy while others compile)"
for i in $(seq 1 "$RUNS"); do
    "$BIN" -q probe $MODE --json > "$OUT/run$i.json"
done
"$BIN" -q probe --quick --json > "$OUT/quick.json"
"$BIN" -q probe --baseline recompile --json > "$OUT/baseline.json"

python3 - "$OUT" "$RUNS" "${MODE:-full}" <<'PY'
import glob, json, os, sys
out, runs, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
base = "/sys/devices/system/cpu/cpu0/cache"
sysfs = {}
for d in sorted(glob.glob(base + "/index*")):
    read = lambda f: open(os.path.join(d, f)).read().strip()
    level, kind, size = int(read("level")), read("type").lower(), read("size")
    mult = {"K": 1024, "M": 1024 ** 2}.get(size[-1], 1)
    name = f"L{level}" + {"data": "d", "instruction": "i"}.get(kind, "")
    sysfs[name] = int(size.rstrip("KM")) * mult

def fmt(b):
    return f"{b / 1024:.0f} KiB" if b < 1 << 20 else f"{b / 2**20:.2f} MiB"

print(f"\n(a) detected sizes vs sysfs, {runs} {mode} runs")
names = ["L1i", "L1d", "L2", "L3"]
print("run   " + "".join(f"{n:>22}" for n in names) + "   duration")
hits = {n: 0 for n in names}
for i in range(1, runs + 1):
    d = json.load(open(f"{out}/run{i}.json"))
    got = {f"L{c['level']}" + {"data": "d", "instruction": "i"}.get(c["kind"], ""): c["size_bytes"] for c in d["caches"]}
    cells = []
    for n in names:
        if n not in got:
            cells.append(f"{'-':>22}")
            continue
        ratio = got[n] / sysfs[n]
        ok = abs(ratio - 1) <= 0.125
        hits[n] += ok
        cells.append(f"{fmt(got[n]):>12} {ratio:5.2f}x {'ok' if ok else '  '}")
    print(f"{i:<6}" + "".join(f"{c:>22}" for c in cells) + f"   {d['duration_s']:.1f} s")
print("sysfs " + "".join(f"{fmt(sysfs[n]):>22}" for n in names))
print("within +-12.5 %: " + ", ".join(f"{n} {hits[n]}/{runs}" for n in names[:3])
      + f"  (L3: effective vs advertised, not a goal)")

b = json.load(open(f"{out}/baseline.json"))
dyn, rec = b["dynamic"], b["recompile"]
print(f"\n(b) instruction-cache sweep, {len(dyn['points'])} points, 0 to {dyn['points'][-1][0]} B")
print(f"in-place rewrite  total {dyn['total_s'] * 1e3:10.2f} ms  (change {dyn['change_s'] * 1e3:.2f} ms, "
      f"mprotect {dyn['flush_s'] * 1e3:.2f} ms, exec {dyn['exec_s'] * 1e3:.2f} ms)")
print(f"recompile (cc)    total {rec['total_s'] * 1e3:10.2f} ms  (write+compile {rec['change_s'] * 1e3:.0f} ms, "
      f"process {rec['process_s'] * 1e3:.0f} ms)")
print(f"speed-up total {b['speedup_total']:.0f}x (goal >= 1000x; paper 91x-192x), "
      f"size change {b['speedup_size_change']:.0f}x (paper 74x-107x)")

q = json.load(open(f"{out}/quick.json"))
full = [json.load(open(f"{out}/run{i}.json"))["duration_s"] for i in range(1, runs + 1)]
print(f"\n(c) probe time: {mode} runs {min(full):.1f}-{max(full):.1f} s (goal {'60' if mode == 'full' else '10'} s), "
      f"quick {q['duration_s']:.1f} s (goal 10 s)")
PY
