#!/usr/bin/env bash
# The baseline gate's two error rates (issue 25; notes/MEASUREMENTS.md "The gate as rates"):
# RUNS benchmark runs, each gated against BASELINE with `harness report`, one summary line per run
# (exit status, load average before/after, the regressions named, the undecided count).
#
#   scripts/gate_rates.sh OUT RUNS [BASELINE]
#
#   OUT       a folder: run<i>/ (the bench run folder), run<i>.bench.log, run<i>.report.log, rates.tsv
#   RUNS      how many runs
#   BASELINE  a run folder or a stored baseline name (default cpu-reference)
# Environment:
#   IMPL      the target (default reference); tests/planted/gate/kernel_slowed_by_env.py with
#             HARNESS_GATE_SLOWDOWN=1.5 is the missed-regression target (its baseline: the same file at 1)
#   SUITES    bench suites (default scaling,receptive_field,kv_cache,timer_selfcheck: bench's "all")
#   CASES     bench --cases (default: every case of the suites)
#   LOOPS     busy-loop processes to start first (default 0: a quiet run; `nproc` loads every core)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="$1"; RUNS="$2"; BASELINE="${3:-cpu-reference}"
IMPL="${IMPL:-reference}"; SUITES="${SUITES:-scaling,receptive_field,kv_cache,timer_selfcheck}"
LOOPS="${LOOPS:-0}"
mkdir -p "$OUT"
pids=()
stop_load() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; }
trap stop_load EXIT INT TERM
for _ in $(seq "$LOOPS"); do python -c 'while True: pass' & pids+=("$!"); done
[ "$LOOPS" -gt 0 ] && sleep 30
load() { cut -d' ' -f1 /proc/loadavg; }
printf 'run\trc\tload_before\tload_after\tbench_s\tregressions\tundecided\n' > "$OUT/rates.tsv"
for i in $(seq "$RUNS"); do
  before=$(load); t0=$(date +%s)
  python -m harness bench --impl "$IMPL" --suite "$SUITES" ${CASES:+--cases "$CASES"} --profile cpu \
    --out "$OUT/run$i" --overwrite --no-progress > "$OUT/run$i.bench.log" 2>&1
  t1=$(date +%s)
  python -m harness report "$OUT/run$i" --baseline "$BASELINE" --no-plots --formats csv \
    --out "$OUT/run$i/report" > "$OUT/run$i.report.log" 2>&1
  rc=$?
  regs=$(python - "$OUT/run$i/report" <<'PY'
import sys, pathlib, pandas as pd
p = pathlib.Path(sys.argv[1]) / "comparison.csv"
if not p.exists():
    print("-"); sys.exit()
df = pd.read_csv(p)
bad = df[df["verdict"].astype(str).str.startswith("regression") & (df["gated"].astype(str) == "True")]
print(";".join(sorted({f"{r.key.split('|')[1].split('@')[0]}:{r.metric}:{r.key.split('|')[-1]}" for r in bad.itertuples()})) or "none")
PY
)
  und=$(grep -o '[0-9]* undecided ([a-z ]*)' "$OUT/run$i.report.log" | tr '\n' ',' )
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$i" "$rc" "$before" "$(load)" "$((t1 - t0))" "$regs" "${und:-0}" | tee -a "$OUT/rates.tsv"
done
