#!/usr/bin/env bash
# The README's test command on a busy machine (issue 10; notes/BUSY_MACHINE.md):
# saturate every core with busy-loop processes, run the command RUNS times, print one line per run
# (outcome counts, duration, load average before and after), and stop the loops on any exit.
#   scripts/busy_check.sh [RUNS] [LOOPS]     defaults: 3 runs, one loop per core
#   CI=true scripts/busy_check.sh 1          the same under the CI profile selection
# Full logs: $BUSY_LOGS (default runs/busy/), one file per run.
set -uo pipefail
cd "$(dirname "$0")/.."
RUNS="${1:-3}"
LOOPS="${2:-$(nproc)}"
LOGS="${BUSY_LOGS:-runs/busy}"
mkdir -p "$LOGS"

pids=()
stop_load() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; }
trap stop_load EXIT INT TERM
for _ in $(seq "$LOOPS"); do
  python -c 'while True: pass' &
  pids+=("$!")
done
sleep 60  # let the 1-minute load average reach the loops

load() { cut -d' ' -f1-3 /proc/loadavg; }
status=0
for i in $(seq "$RUNS"); do
  log="$LOGS/run$i.log"
  before=$(load); start=$(date +%s)
  python -m pytest -n 2 -q -p no:cacheprovider > "$log" 2>&1
  rc=$?; end=$(date +%s)
  [ "$rc" -eq 0 ] || status=1
  echo "run $i: exit $rc, $(tail -n 1 "$log" | tr -d '='), $((end - start)) s, CI=${CI:-unset}," \
       "$LOOPS busy loops on $(nproc) cores, load average before: $before, after: $(load)"
done
exit "$status"
