#!/usr/bin/env bash
# Whole-binary analysis speed and memory: `loopscope loops --json` (disassembly, CFG, loops,
# source lines, JSON) against `objdump -d` (disassembly alone) on one large binary, in one run,
# alternating the two. Prints each one's median wall time and peak resident memory over RUNS
# runs, the time ratio and loopscope's peak as a multiple of the file's size.
#   bench/loops_vs_objdump.sh [BINARY] [RUNS]
# Peak memory comes from /usr/bin/time -v when it is installed, else from VmHWM in /proc.
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
file_bytes=$(stat -L -c %s "$target")
text_bytes=$(size -A "$target" | awk '$1 == ".text" {print $2}')
echo "binary: $target ($((file_bytes / 1000000)) MB, .text $((text_bytes / 1000000)) MB)"
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
echo "$runs runs each, alternating, medians"

# Runs a command with stdout discarded; prints "seconds peak_kb".
measure() {
    if [ -x /usr/bin/time ]; then
        local log
        log=$(mktemp)
        /usr/bin/time -f '%e %M' -o "$log" "$@" > /dev/null
        cat "$log"
        rm -f "$log"
    else
        local start end pid peak=0 hwm
        start=$(date +%s.%N)
        "$@" > /dev/null &
        pid=$!
        while kill -0 "$pid" 2> /dev/null; do
            hwm=$(awk '/^VmHWM/ {print $2}' "/proc/$pid/status" 2> /dev/null || true)
            [ -n "$hwm" ] && [ "$hwm" -gt "$peak" ] && peak=$hwm
            sleep 0.05
        done
        wait "$pid"
        end=$(date +%s.%N)
        echo "$(echo "$end - $start" | bc -l) $peak"
    fi
}

median() { sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }

objdump_runs=()
loopscope_runs=()
for _ in $(seq "$runs"); do
    objdump_runs+=("$(measure objdump -d "$target")")
    loopscope_runs+=("$(measure "$loopscope" loops "$target" --no-cache --json)")
done
column_of() { printf '%s\n' "${@:2}" | awk -v c="$1" '{print $c}' | median; }
objdump_s=$(column_of 1 "${objdump_runs[@]}")
objdump_kb=$(column_of 2 "${objdump_runs[@]}")
loopscope_s=$(column_of 1 "${loopscope_runs[@]}")
loopscope_kb=$(column_of 2 "${loopscope_runs[@]}")
loops=$("$loopscope" loops "$target" --no-cache --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["loop_count"])')
printf 'objdump -d:          %8.2f s  peak %6d MB\n' "$objdump_s" "$((objdump_kb / 1024))"
printf 'loopscope loops:     %8.2f s  peak %6d MB  (%s loops)\n' "$loopscope_s" "$((loopscope_kb / 1024))" "$loops"
printf 'ratio objdump/loopscope: %.2fx\n' "$(echo "$objdump_s / $loopscope_s" | bc -l)"
printf 'loopscope peak / file size: %.2fx\n' "$(echo "$loopscope_kb * 1024 / $file_bytes" | bc -l)"
