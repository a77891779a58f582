#!/usr/bin/env bash
# Simulator throughput, side by side with pycachesim (PyPI, installed into bench/.venv) on the
# same access streams and the same hierarchies, in one run. Prints accesses/s and the ratio.
#   bench/simulate.sh            (builds loopscope in release mode first; REPEATS=5 by default)
# Streams: an L1-resident triad swept R times, and a miss-heavy 2D 5-point Jacobi through three
# levels. The addresses pycachesim gets are generated here with loopscope's default layout
# (arrays in declaration order from address 0, 64-byte aligned), statement by statement (loads
# in order, then the store), so both simulators see the identical stream; their miss counts are
# printed as a cross-check.
# Rates use CPU time (user + system), not wall time: the machine is shared with compilers, and
# CPU time is what each simulator itself spends; wall-clock rates are printed too. Each figure
# is the median of REPEATS runs.
# The comparison is not symmetric, and it leans against loopscope:
#   - pycachesim is timed on its C-backed `loadstore` alone, over a list of addresses built
#     beforehand in Python (building the list is not timed); loopscope's CPU time is its whole
#     process: start-up, reading and parsing the kernel, generating the addresses from the loop
#     nest, allocating the cache model, simulating and printing JSON.
#   - loopscope also keeps per-reference counters and write-back/fill byte counts; pycachesim
#     keeps per-level counts only.
#   - loopscope's "wall" rate is its own `duration_s` (stream and simulation, after parsing);
#     pycachesim's is the `loadstore` call.
# In pycachesim's favour nothing is left out that we know of: `loadstore` over Python lists is
# its documented fast interface.
set -euo pipefail
cd "$(dirname "$0")/.."
REPEATS=${REPEATS:-5}

if [ ! -x bench/.venv/bin/python ]; then
  python3 -m venv bench/.venv
fi
bench/.venv/bin/python -c 'import cachesim' 2>/dev/null || bench/.venv/bin/pip install -q pycachesim
cargo build -q --release -p loopscope
LOOPSCOPE=target/release/loopscope

REPEATS=$REPEATS LOOPSCOPE=$LOOPSCOPE bench/.venv/bin/python - <<'PY'
import json, os, resource, statistics, subprocess, time
from cachesim import CacheSimulator, Cache, MainMemory

repeats = int(os.environ["REPEATS"])
loopscope = os.environ["LOOPSCOPE"]

def align(x):
    return (x + 63) // 64 * 64

def triad(n, r):
    a, b, c, d = 0, align(8 * n), 2 * align(8 * n), 3 * align(8 * n)
    one = [([b + 8 * i, c + 8 * i, d + 8 * i], [a + 8 * i]) for i in range(n)]
    return one * r

def jacobi(m, n):
    a, b = 0, align(8 * m * n)
    out = []
    for j in range(1, m - 1):
        for i in range(1, n - 1):
            out.append(([a + 8 * (j * n + i - 1), a + 8 * (j * n + i + 1), a + 8 * ((j - 1) * n + i),
                         a + 8 * ((j + 1) * n + i)], [b + 8 * (j * n + i)]))
    return out

def pycachesim(spec, stream):
    mem = MainMemory()
    levels = []  # built from the last level up, as pycachesim's README wires them
    prev = None
    for name, sets, ways, line in reversed(spec):
        kw = {} if prev is None else {"store_to": prev, "load_from": prev}
        prev = Cache(name, sets, ways, line, "LRU", **kw)
        levels.append(prev)
    mem.load_to(levels[0]); mem.store_from(levels[0])
    sim = CacheSimulator(levels[-1], mem)
    t, w = time.process_time(), time.perf_counter()
    sim.loadstore(stream, length=8)
    cpu, wall = time.process_time() - t, time.perf_counter() - w
    misses = [s["MISS_count"] for s in list(sim.stats())[:len(spec)]]
    return cpu, wall, misses

def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime

def ours(args):
    before = children_cpu()
    out = subprocess.run([loopscope, "simulate", *args, "--json", "-q"], check=True, capture_output=True, text=True)
    cpu = children_cpu() - before
    doc = json.loads(out.stdout)
    return cpu, doc["duration_s"], doc["accesses"], [l["misses"] for l in doc["levels"]]

def spec_of(cache):
    out = []
    for part in cache.split(","):
        name, rest = part.split("=")
        size, ways, line = rest.split(":")
        size = int(size[:-1]) * (1024 if size[-1] == "K" else 1024 * 1024)
        out.append((name, size // (int(ways) * int(line)), int(ways), int(line)))
    return out

cases = [
    ("L1-resident triad (N=256, R=20000)", ["bench/triad-repeat.c", "-D", "N=256", "-D", "R=20000"],
     "L1=32K:8:64", lambda: triad(256, 20000)),
    ("miss-heavy 2d-5pt, 3 levels (M=1000, N=1000)", ["examples/kernels/2d-5pt.c", "-D", "M=1000", "-D", "N=1000"],
     "L1=32K:8:64,L2=512K:8:64,L3=4M:16:64", lambda: jacobi(1000, 1000)),
]
print(f"median of {repeats} runs each; the machine is shared, so figures are noisy")
for title, args, cache, make in cases:
    stream = make()
    accesses = sum(len(l) + len(s) for l, s in stream)
    py = [pycachesim(spec_of(cache), stream) for _ in range(repeats)]
    me = [ours(args + ["--cache", cache]) for _ in range(repeats)]
    assert me[0][2] == accesses, (me[0][2], accesses)
    py_cpu, py_wall = (accesses / statistics.median(x[i] for x in py) for i in (0, 1))
    me_cpu, me_wall = (accesses / statistics.median(x[i] for x in me) for i in (0, 1))
    print(f"\n{title}: {accesses} accesses, cache {cache}")
    print(f"  misses per level  loopscope {me[0][3]}  pycachesim {py[0][2]}")
    print(f"  loopscope   {me_cpu / 1e6:8.1f} M accesses/s CPU   ({me_wall / 1e6:.1f} M/s wall)")
    print(f"  pycachesim  {py_cpu / 1e6:8.1f} M accesses/s CPU   ({py_wall / 1e6:.1f} M/s wall)")
    print(f"  ratio       {me_cpu / py_cpu:8.1f}x (CPU time)")
PY
