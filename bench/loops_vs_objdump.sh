#!/usr/bin/env bash
# Whole-binary analysis speed: `loopscope loops` (disassembly, CFG, loops, source lines) against
# `objdump -d` (disassembly alone) on one large binary, in one run. Prints both times (median
# of N runs) and their ratio. Goal: ratio > 1 (loopscope faster).
#   bench/loops_vs_objdump.sh [BINARY] [RUNS]
set -euo pipefail
cd "$(dirname "$0")/.."
target=${1:-$(ls /usr/lib/x86_64-linux-gnu/libLLVM-*.so.1 2>/dev/null | sort -V | tail -n1)}
runs=${2:-3}
if [ -z "$target" ] || [ ! -f "$target" ]; then
    echo "no binary given and no libLLVM found" >&2
    exit 2
fi
cargo build --release -q -p loopscope
loopscope=target/release/loopscope
text_bytes=$(size -A "$target" | awk '$1 == ".text" {print $2}')
echo "binary: $target (.text $((text_bytes / 1000000)) MB), $runs runs each, medians"

median() { sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
time_of() {
    local start end
    start=$(date +%s.%N)
    "$@" > /dev/null
    end=$(date +%s.%N)
    echo "$end - $start" | bc -l
}

objdump_s=$(for _ in $(seq "$runs"); do time_of objdump -d "$target"; done | median)
loopscope_s=$(for _ in $(seq "$runs"); do time_of "$loopscope" loops "$target" --no-cache --json; done | median)
loops=$("$loopscope" loops "$target" --no-cache --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["loop_count"])')
printf 'objdump -d:          %8.2f s\n' "$objdump_s"
printf 'loopscope loops:     %8.2f s  (%s loops)\n' "$loopscope_s" "$loops"
printf 'ratio objdump/loopscope: %.2fx\n' "$(echo "$objdump_s / $loopscope_s" | bc -l)"
