#!/usr/bin/env bash
# The ONE command for the lent GPU machine (notes/GPU_RUN.md):
#
#     run(command="bash scripts/device/gpu_baseline.sh", carry=[".device"], timeout_s=590)
#
# Stages, in priority order, each under `timeout` with its own budget (SIGINT first, so pytest
# still writes its conformance table and Python unwinds; SIGKILL 15 s later). Seconds a stage
# leaves unused roll over to the next; a stage never gets more than what is left before the
# overall deadline, so the script ends by ~9.6 min even when a stage hangs. Budgets (s, own) from
# the first H200 run (2026-12-04), worst case (every stage at its whole budget, HARNESS_DRY_RUN=1):
# preamble 15, then 145 + 75 + 75 + 85 + 150 = 545 = the deadline minus the packing reserve:
#   bench_scaling  harness bench --suite scaling --profile gpu (the reference: SDPA backends, naive,
#                  sliding window, banded, lstm; forward, backward, forward+backward) into RUN/bench   145
#   triton_bench   harness bench --impl reference.triton.flash_attention --suite scaling --cases
#                  target.sdpa,target.sliding_window into RUN/triton_bench: the tiled kernel's rows,
#                  reported beside bench/'s naive and SDPA rows                                        75
#   conformance    harness check --impl reference --hypothesis-profile ci -- --device cuda -n 8, the
#                  table written to RUN/bench/conformance/ (inside the bench run folder, where
#                  `harness report` reads it: notes/RESULTS_SCHEMA.md); measured 65 s with -n 8       75
#   triton_conformance  the same check against the Triton reference kernels (reference/triton/,
#                  issue 22), compiled on the GPU, -n 8, table in RUN/triton_bench/conformance/        85
#   finetune       harness bench --suite finetune --cases majority_class,reference (measured 151 s)  150
#   finetune_swap  --cases swap.sdpa,swap.layernorm into its own folder, seeded with finetune's rows
#                  and run with --resume, so the stock model's per-seed runs are reused (not retrained);
#                  needs ~330 s (10 seeds x ~31 s): in one call it logs the seeds it finishes        60*
#   bench_checks   harness bench --suite timer_selfcheck,receptive_field,kv_cache into RUN/bench with
#                  --resume (keeps bench_scaling's rows; measured ~26 + 81 s + start-up)              60*
#   (* live on rollover: in the worst case nothing is left for them)
# The stage "bench" of the first run's plan (all four bench suites in one stage) lost the whole
# scaling sweep to receptive_field and kv_cache: with a time budget, `harness bench` runs scaling last.
# Where triton cannot be imported the Triton stages are recorded "skipped: triton not installed".
# The harness writes results.jsonl row by row, so a stage cut short still leaves its finished points.
#
# Returned in $OUT (after every stage, and by the EXIT trap): gpu-run.tar.gz (the run folder RUN:
# bench/ finetune/ finetune_swap/ triton_bench/ logs/ (one log per stage, bench_scaling.env.json: the
# scaling stage's env.json, which bench_checks replaces) stages.json device_manifest.json), gpu-run.log (this
# script's whole output), stages.json (per stage: exit code, seconds, timed out?). The report is
# built later, locally: python scripts/device/unpack_baseline.py OUT/gpu-run.tar.gz
#
# Environment (all optional):
#   HARNESS_REHEARSE=1          CPU rehearsal: --device cpu, bench --profile tiny, finetune --profile
#                               tiny (= the smoke fine-tune), conformance on a -k subset, small budgets,
#                               OUT defaults to runs/device-rehearsal/out
#   HARNESS_STAGES              comma-separated subset (default bench_scaling,triton_bench,conformance,
#                               triton_conformance,finetune,finetune_swap,bench_checks; they always run in
#                               that order; "bench" = bench_scaling,bench_checks; an unknown name: exit 2)
#   HARNESS_BUDGET_BENCH_SCALING, HARNESS_BUDGET_TRITON_BENCH, HARNESS_BUDGET_CONFORMANCE,
#   HARNESS_BUDGET_TRITON_CONFORMANCE, HARNESS_BUDGET_FINETUNE, HARNESS_BUDGET_FINETUNE_SWAP,
#   HARNESS_BUDGET_BENCH_CHECKS seconds per stage (defaults below; HARNESS_BUDGET_BENCH is no longer
#                               read, with a warning)
#   HARNESS_DEADLINE_S          the whole script, from its start (default 560; rehearsal 300)
#   HARNESS_ROLLOVER=0          a stage's unused seconds do not go to the next one
#   HARNESS_INNER_MARGIN_S      the bench stages get --time-budget-s = their budget minus this (35)
#   HARNESS_RESUME=1            keep RUN from an earlier call on the same (still warm) machine and pass
#                               --resume: only the missing points are measured
#   HARNESS_CHECK_K             pytest -k expression for the conformance stage ('' = everything)
#   HARNESS_CHECK_ARGS          extra pytest arguments for the conformance stage (default "-n 8" on the
#                               device, none when rehearsing; '' for none)
#   HARNESS_TRITON_IMPLS        the Triton targets of triton_conformance (space-separated; default the five
#                               modules of reference/triton; rehearsal: reference.triton.norms)
#   HARNESS_TRITON_K            pytest -k expression for triton_conformance ('' = everything; rehearsal:
#                               'rmsnorm and not grad')
#   HARNESS_TRITON_ARGS         extra pytest arguments for triton_conformance (default "-n 8": the first
#                               call of each configuration compiles its kernels, so the workers compile
#                               in parallel; none when rehearsing; '' for none)
#   HARNESS_DRY_RUN=1           print each stage's command and budget and run none (no GPU, no Python
#                               stage): check the plan with `HARNESS_DRY_RUN=1 bash gpu_baseline.sh`
#   HARNESS_DEVICE_ASSETS       the packed assets (default .device; scripts/device/pack_assets.py)
#   HARNESS_RUN_DIR             where the run folder is built (default runs/gpu-run)
#   HARNESS_DEVICE              the torch device (default cuda; rehearsal cpu)
#   HARNESS_SEED_FINETUNE       results.jsonl with the stock model's rows for finetune_swap when this
#                               run has no finetune/ (default reports/baselines/gpu-h200/finetune/...)
set -u -o pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$REPO" || exit 2
T0_NS=$(date +%s%N)
REHEARSE="${HARNESS_REHEARSE:-0}"

if [ -n "${HARNESS_BUDGET_BENCH:-}" ]; then  # the stage "bench" was split in two (2026-12-04)
  echo "warning: HARNESS_BUDGET_BENCH is no longer read: the bench stage is now bench_scaling and" \
       "bench_checks (HARNESS_BUDGET_BENCH_SCALING, HARNESS_BUDGET_BENCH_CHECKS)" >&2
fi
if [ "$REHEARSE" = 1 ]; then
  DEV="${HARNESS_DEVICE:-cpu}"; BENCH_PROFILE=tiny; FT_PROFILE=tiny
  DEADLINE="${HARNESS_DEADLINE_S:-300}"
  B_SCALING="${HARNESS_BUDGET_BENCH_SCALING:-60}"; B_TBENCH="${HARNESS_BUDGET_TRITON_BENCH:-45}"
  B_CONF="${HARNESS_BUDGET_CONFORMANCE:-60}"; B_TCONF="${HARNESS_BUDGET_TRITON_CONFORMANCE:-90}"
  B_FT="${HARNESS_BUDGET_FINETUNE:-90}"; B_SWAP="${HARNESS_BUDGET_FINETUNE_SWAP:-60}"
  B_CHECKS="${HARNESS_BUDGET_BENCH_CHECKS:-60}"
  CHECK_K="${HARNESS_CHECK_K-t5_bucket or sinusoidal}"; CHECK_ARGS="${HARNESS_CHECK_ARGS-}"
  TRITON_IMPLS="${HARNESS_TRITON_IMPLS:-reference.triton.norms}"
  TRITON_K="${HARNESS_TRITON_K-rmsnorm and not grad}"; TRITON_ARGS="${HARNESS_TRITON_ARGS-}"
  : "${OUT:=$REPO/runs/device-rehearsal/out}"
else
  # budgets from the first H200 run (2026-12-04; notes/GPU_RUN.md, "Time budget"): the stages up to
  # finetune take the whole deadline at their own budgets (the dry run's worst case); finetune_swap
  # and bench_checks live on the seconds the others leave (rollover)
  DEV="${HARNESS_DEVICE:-cuda}"; BENCH_PROFILE=gpu; FT_PROFILE=gpu
  DEADLINE="${HARNESS_DEADLINE_S:-560}"
  B_SCALING="${HARNESS_BUDGET_BENCH_SCALING:-145}"; B_TBENCH="${HARNESS_BUDGET_TRITON_BENCH:-75}"
  B_CONF="${HARNESS_BUDGET_CONFORMANCE:-75}"; B_TCONF="${HARNESS_BUDGET_TRITON_CONFORMANCE:-85}"
  B_FT="${HARNESS_BUDGET_FINETUNE:-150}"; B_SWAP="${HARNESS_BUDGET_FINETUNE_SWAP:-60}"
  B_CHECKS="${HARNESS_BUDGET_BENCH_CHECKS:-60}"
  # the machine has 16 cores: conformance with -n 8 took 65 s where the serial run had done ~50 of
  # ~185 tests in 45 s; '' (HARNESS_CHECK_ARGS= ) for none
  CHECK_K="${HARNESS_CHECK_K-}"; CHECK_ARGS="${HARNESS_CHECK_ARGS--n 8}"
  TRITON_IMPLS="${HARNESS_TRITON_IMPLS:-reference.triton.flash_attention reference.triton.kvcache reference.triton.norms reference.triton.rope reference.triton.rope_interleaved}"
  TRITON_K="${HARNESS_TRITON_K-}"; TRITON_ARGS="${HARNESS_TRITON_ARGS--n 8}"
  if [ -z "${OUT:-}" ] && [ "${HARNESS_DRY_RUN:-0}" != 1 ]; then
    OUT="$REPO/runs/device-out"; echo "warning: \$OUT is unset; writing to $OUT" >&2
  fi
fi
#: the stages in the order they run (priority order; HARNESS_STAGES picks a subset, never reorders)
ALL_STAGES="bench_scaling,triton_bench,conformance,triton_conformance,finetune,finetune_swap,bench_checks"
STAGES="${HARNESS_STAGES:-$ALL_STAGES}"
_named=""
for st in ${STAGES//,/ }; do
  [ "$st" = bench ] && st=bench_scaling,bench_checks   # "bench" (before the split) = both halves
  for s1 in ${st//,/ }; do
    case ",$ALL_STAGES," in *",$s1,"*) ;; *) echo "unknown stage '$s1' in HARNESS_STAGES (known: $ALL_STAGES)" >&2; exit 2 ;; esac
  done
  _named="$_named,$st"
done
STAGES="${_named#,}"
DRY_RUN="${HARNESS_DRY_RUN:-0}"
RUN="${HARNESS_RUN_DIR:-$REPO/runs/gpu-run}"
if [ "$DRY_RUN" = 1 ]; then  # a plan, not a run: nothing of an earlier run is touched
  DRY_DIR="$(mktemp -d)"; RUN="${HARNESS_RUN_DIR:-$DRY_DIR/gpu-run}"; : "${OUT:=$DRY_DIR/out}"
fi
ASSETS="${HARNESS_DEVICE_ASSETS:-$REPO/.device}"
RESERVE_S=15   # kept back from the deadline for the final packing
#: `harness bench --time-budget-s` = the stage's budget minus this: the bench then stops starting
#: points in time to finish the one in flight and write fits.json / receptive_field_grad.csv
INNER_MARGIN_S="${HARNESS_INNER_MARGIN_S:-35}"

case "$(cd "$(dirname "$RUN")" 2>/dev/null && pwd)/$(basename "$RUN")" in
  /|"$REPO"|"$REPO/"|"$HOME") echo "refusing HARNESS_RUN_DIR=$RUN (it is wiped at the start)" >&2; exit 2 ;;
esac
mkdir -p "$OUT"
rm -f "$OUT/gpu-run.tar.gz" "$OUT/stages.json" && : > "$OUT/gpu-run.log"   # (a reused local OUT)
if [ "${HARNESS_RESUME:-0}" = 1 ]; then RESUME=(--resume); else RESUME=(); rm -rf "$RUN"; fi
mkdir -p "$RUN/logs"
STAGES_TSV="$RUN/logs/stages.tsv"
[ -f "$STAGES_TSV" ] || : > "$STAGES_TSV"
echo "$(date -u +%FT%TZ) start (rehearse=$REHEARSE, device=$DEV, stages=$STAGES, deadline=${DEADLINE}s)" >> "$STAGES_TSV.calls"

# this script's whole output -> $OUT/gpu-run.log (written as it goes: it survives a hard kill)
exec > >(tee -a "$OUT/gpu-run.log") 2>&1
TEE_PID=$!

export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 \
       TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false PYTHONHASHSEED=0
if [ -d "$ASSETS/minilm" ]; then
  export HARNESS_FINETUNE_MODEL_DIR="$ASSETS/minilm" HARNESS_FINETUNE_CORPUS="$ASSETS/rotten_tomatoes_corpus_full.csv.bz2"
  if [ -f "$ASSETS/manifest.json" ]; then
    HARNESS_FINETUNE_WEIGHTS_NOTE="$(python3 -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))["note"], separators=(",", ":")))' "$ASSETS/manifest.json")" \
      && export HARNESS_FINETUNE_WEIGHTS_NOTE
    cp "$ASSETS/manifest.json" "$RUN/device_manifest.json"
  fi
else
  echo "warning: no packed assets in $ASSETS (python scripts/device/pack_assets.py; carry [\".device\"]):" \
       "the finetune points will be recorded as skipped unless the pip packages are installed"
fi

# pure-Python modules carried in .device/pylib/<name>/ (pack_assets.py: tabulate, which pandas'
# to_markdown needs for the conformance table), each used only where the machine cannot import it
for dir in "$ASSETS"/pylib/*/; do
  [ -d "$dir" ] || continue
  name="$(basename "$dir")"
  if ! python3 -c "import $name" 2>/dev/null; then
    export PYTHONPATH="$PYTHONPATH:${dir%/}"
    echo "=== $name is not installed here: using the copy carried in ${dir%/}"
  fi
done
# wheels carried in .device/wheels/ (optional, put there by hand): installed without network
if compgen -G "$ASSETS/wheels/*.whl" > /dev/null; then
  WHEELS_TARGET="$(dirname "$RUN")/device-wheels"
  if timeout 120 python3 -m pip install --quiet --no-index --no-deps --upgrade --target "$WHEELS_TARGET" \
       "$ASSETS"/wheels/*.whl; then
    export PYTHONPATH="$PYTHONPATH:$WHEELS_TARGET"
    echo "=== installed $(ls "$ASSETS"/wheels/*.whl | wc -l) carried wheel(s) into $WHEELS_TARGET"
  else
    echo "warning: installing the carried wheels failed"
  fi
fi

#: seconds the preamble took on the H200 (2026-12-04: ~15 s with the packing after it); the dry run
#: charges them before the first stage
PREAMBLE_S=15
DRY_ELAPSED=0  # dry run: the seconds the stages planned so far would take (each its whole budget)
elapsed_s() { echo $(( ($(date +%s%N) - T0_NS) / 1000000000 + DRY_ELAPSED )); }
json_str() { local s=${1//\\/\\\\}; s=${s//\"/\\\"}; s=${s//$'\t'/ }; printf '"%s"' "$s"; }

write_stages_json() {  # stages.tsv -> stages.json (RUN and OUT)
  local first=1 name rc secs timed budget status cmd
  {
    printf '{"rehearse": %s, "device": %s, "deadline_s": %s, "elapsed_s": %s, "stages": [' \
      "$([ "$REHEARSE" = 1 ] && echo true || echo false)" "$(json_str "$DEV")" "$DEADLINE" "$(elapsed_s)"
    while IFS=$'\t' read -r name rc secs timed budget status cmd; do
      [ -n "$name" ] || continue
      [ $first = 1 ] || printf ','
      first=0
      printf '\n  {"stage": %s, "status": %s, "exit_code": %s, "seconds": %s, "timed_out": %s, "budget_s": %s, "command": %s}' \
        "$(json_str "$name")" "$(json_str "$status")" "$rc" "$secs" "$timed" "$budget" "$(json_str "$cmd")"
    done < "$STAGES_TSV"
    printf '\n]}\n'
  } > "$RUN/stages.json.tmp" && mv "$RUN/stages.json.tmp" "$RUN/stages.json" && cp "$RUN/stages.json" "$OUT/stages.json"
}

pack() {  # RUN -> $OUT/gpu-run.tar.gz (atomically: a kill mid-way leaves the previous one)
  write_stages_json
  local parent base; parent="$(dirname "$RUN")"; base="$(basename "$RUN")"
  if tar -czf "$parent/.$base.tar.gz.tmp" -C "$parent" "$base"; then
    if [ "$(stat -c %s "$parent/.$base.tar.gz.tmp")" -gt 16000000 ]; then  # the tool returns <= 16 MiB
      echo "warning: gpu-run.tar.gz over 16 MB: packed again without logs/*.log (see gpu-run.log)"
      tar -czf "$parent/.$base.tar.gz.tmp" --exclude="$base/logs/*.log" -C "$parent" "$base"
    fi
    mv -f "$parent/.$base.tar.gz.tmp" "$OUT/gpu-run.tar.gz"
  else
    echo "warning: packing $RUN failed"
  fi
}

FINISHED=0
finish() {
  [ "$FINISHED" = 1 ] && return
  FINISHED=1
  echo "=== done in $(elapsed_s) s; results: $OUT/gpu-run.tar.gz, $OUT/stages.json, $OUT/gpu-run.log"
  pack
  ls -l "$OUT"
  exec 1>&- 2>&-
  wait "$TEE_PID" 2>/dev/null
  local log="$OUT/gpu-run.log"   # the tool returns files <= 16 MiB: keep the head and the tail
  if [ "$(stat -c %s "$log" 2>/dev/null || echo 0)" -gt 15000000 ]; then
    { head -c 2000000 "$log"; printf '\n[... cut: see logs/ in gpu-run.tar.gz ...]\n'; tail -c 12000000 "$log"; } > "$log.cut" \
      && mv -f "$log.cut" "$log"
  fi
}
trap finish EXIT
trap 'echo "=== interrupted (signal)"; exit 143' TERM INT HUP

wanted() { case ",$STAGES," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }

# SIGINT back to its default in the stage's process: a command started in the background (as the
# device tool may start this script) inherits SIGINT *ignored*, and bash cannot undo that; Python
# then never raises KeyboardInterrupt, pytest never writes its conformance table, and only the
# SIGKILL 15 s later stops it. Reset before exec, Python installs its handler again.
DFL_INT=(python3 -c 'import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execvp(sys.argv[1], sys.argv[1:])')
SLACK=0   # seconds a stage left unused roll over to the next one

run_stage() {  # run_stage NAME BUDGET_S COMMAND...
  local name=$1 own=$2; shift 2
  wanted "$name" || return 0
  local left budget=$(( own + SLACK ))
  left=$(( DEADLINE - RESERVE_S - $(elapsed_s) ))
  if [ "$left" -lt 10 ]; then
    echo "=== stage $name: skipped, only ${left}s left before the ${DEADLINE}s deadline"
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" null 0 false "$own" "skipped: deadline" "$*" >> "$STAGES_TSV"
    pack
    return 0
  fi
  [ "$budget" -gt "$left" ] && budget=$left
  local inner=$(( budget - INNER_MARGIN_S )) args=() a
  [ "$inner" -lt 5 ] && inner=5
  for a in "$@"; do args+=("${a//@INNER_BUDGET@/$inner}"); done
  set -- "${args[@]}"
  if [ "$DRY_RUN" = 1 ]; then  # the worst case: the stage uses its whole budget, nothing rolls over
    echo "=== stage $name (dry run): budget ${budget}s (own ${own}s), starts at $(elapsed_s)s: $*"
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" 0 "$budget" false "$own" "dry run" "$*" >> "$STAGES_TSV"
    DRY_ELAPSED=$(( DRY_ELAPSED + budget )); SLACK=0
    return 0
  fi
  echo
  echo "=== stage $name (budget ${budget}s = own ${own}s + ${SLACK}s rolled over, capped by the deadline;" \
       "$(elapsed_s)s elapsed): $*"
  local t0 rc ms secs timed=false
  t0=$(date +%s%N)
  timeout -s INT -k 15 "$budget" "${DFL_INT[@]}" "$@" 2>&1 | tee -a "$RUN/logs/$name.log"
  rc=${PIPESTATUS[0]}
  ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  secs="$((ms / 1000)).$(printf '%03d' $((ms % 1000)))"
  SLACK=$(( budget - ms / 1000 )); [ "$SLACK" -lt 0 ] && SLACK=0; [ "${HARNESS_ROLLOVER:-1}" = 0 ] && SLACK=0
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then timed=true; fi
  echo "=== stage $name: exit $rc after ${secs}s$([ $timed = true ] && echo " (TIMED OUT at ${budget}s)")"
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$rc" "$secs" "$timed" "$budget" ran "$*" >> "$STAGES_TSV"
  pack
}

# ---- preamble: what machine and libraries this is (logs/preamble.log), and the assets' check
if [ "$DRY_RUN" = 1 ]; then
  echo "=== dry run (HARNESS_DRY_RUN=1): the plan, each stage at its whole budget; nothing runs; RUN=$RUN OUT=$OUT"
  echo "=== preamble (dry run): charged ${PREAMBLE_S}s"
  DRY_ELAPSED=$PREAMBLE_S
else {
  echo "=== $(date -u +%FT%TZ) gpu_baseline.sh: rehearse=$REHEARSE device=$DEV stages=$STAGES deadline=${DEADLINE}s"
  echo "=== git: $(git rev-parse HEAD 2>/dev/null || echo '?') $(git status --porcelain 2>/dev/null | wc -l) changed file(s)"
  timeout 20 nvidia-smi 2>&1 || echo "(nvidia-smi unavailable)"
  timeout 20 nvidia-smi --query-gpu=name,uuid,driver_version,memory.total,clocks.max.sm,power.limit \
    --format=csv 2>/dev/null
  timeout 30 python3 -m pip list --format=freeze > "$RUN/logs/pip-freeze.txt" 2>&1
  timeout 60 python3 - <<'EOF' 2>&1
import importlib, json, os, sys, platform
print("python", sys.version.split()[0], platform.platform())
for m in ("torch", "transformers", "huggingface_hub", "tokenizers", "safetensors", "triton", "pandas", "hypothesis", "pytest"):
    try:
        print(f"{m} {importlib.import_module(m).__version__}")
    except Exception as exc:  # noqa: BLE001
        print(f"{m} unavailable: {exc!r}")
import torch
print("cuda available", torch.cuda.is_available(), "| torch.version.cuda", torch.version.cuda,
      "| devices", [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())])
from harness.bench.models import finetune_data as fd
try:
    print("finetune model", fd.model_path(), "| corpus", fd.corpus_path())
    print("weights note", json.dumps(fd.weights_note()))
except fd.DataUnavailable as exc:
    print("finetune data unavailable:", exc)
man = os.environ.get("HARNESS_FINETUNE_MODEL_DIR")
if man and os.path.isfile(os.path.join(man, "..", "manifest.json")):
    import hashlib
    want = json.load(open(os.path.join(man, "..", "manifest.json")))["sha256_fp16"]
    got = hashlib.sha256(open(os.path.join(man, "model.safetensors"), "rb").read()).hexdigest()
    print("fp16 weights sha256", "matches the manifest" if got == want else f"MISMATCH: {got} != {want}")
EOF
} 2>&1 | tee "$RUN/logs/preamble.log"
fi
pack

H=(python3 -m harness)
skip_stage() {  # skip_stage NAME BUDGET_S WHY
  wanted "$1" || return 0
  echo "=== stage $1: skipped ($3)"
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" null 0 false "$2" "skipped: $3" "" >> "$STAGES_TSV"
  pack
}
HAVE_TRITON=1   # the Triton stages are recorded "skipped: triton not installed" where it cannot be imported
if [ "$DRY_RUN" != 1 ] && { wanted triton_bench || wanted triton_conformance; } \
   && ! python3 -c 'import triton' >/dev/null 2>&1; then
  HAVE_TRITON=0
fi

# 1. the reference's scaling sweep alone (SDPA, naive, sliding window, ...; forward, backward,
# forward+backward): on 2026-12-04 it came last behind receptive_field and kv_cache in one bench
# stage, and those two took its whole budget. receptive_field,kv_cache,timer_selfcheck are the
# last stage (bench_checks), into the same folder with --resume
run_stage bench_scaling "$B_SCALING" "${H[@]}" bench --impl reference --suite scaling \
  --profile "$BENCH_PROFILE" --device "$DEV" --out "$RUN/bench" --no-progress --time-budget-s @INNER_BUDGET@ "${RESUME[@]}"

# 2. the Triton flash attention's scaling rows (reference/triton/, issue 22), reported beside 1's
if [ "$HAVE_TRITON" = 1 ]; then
  run_stage triton_bench "$B_TBENCH" "${H[@]}" bench --impl reference.triton.flash_attention --suite scaling \
    --cases target.sdpa,target.sliding_window --profile "$BENCH_PROFILE" --device "$DEV" --out "$RUN/triton_bench" \
    --no-progress --time-budget-s @INNER_BUDGET@ --resume
else
  skip_stage triton_bench "$B_TBENCH" "triton not installed"
fi

# 3. the reference's conformance table (inside bench/, where `harness report` reads it)
CHECK=("${H[@]}" check --impl reference --hypothesis-profile ci --report "$RUN/bench/conformance")
[ -n "$CHECK_K" ] && CHECK+=(-k "$CHECK_K")
# shellcheck disable=SC2206  # HARNESS_CHECK_ARGS is split on spaces on purpose
CHECK+=(-- --device "$DEV" --junitxml "$RUN/logs/conformance-junit.xml" $CHECK_ARGS)
run_stage conformance "$B_CONF" "${CHECK[@]}"

# 4. the Triton kernels' conformance: compiled on the GPU (interpreted on a CPU rehearsal), every
# applicable suite; the table in triton_bench/conformance/
if [ "$HAVE_TRITON" = 1 ]; then
  TCHECK=("${H[@]}" check --hypothesis-profile ci --report "$RUN/triton_bench/conformance")
  # shellcheck disable=SC2206  # HARNESS_TRITON_IMPLS is a space-separated list on purpose
  for impl in $TRITON_IMPLS; do TCHECK+=(--impl "$impl"); done
  [ -n "$TRITON_K" ] && TCHECK+=(-k "$TRITON_K")
  # shellcheck disable=SC2206  # HARNESS_TRITON_ARGS is split on spaces on purpose
  TCHECK+=(-- --device "$DEV" --junitxml "$RUN/logs/triton-conformance-junit.xml" $TRITON_ARGS)
  run_stage triton_conformance "$B_TCONF" "${TCHECK[@]}"
else
  skip_stage triton_conformance "$B_TCONF" "triton not installed"
fi

# 5. the fine-tune: the stock model (majority_class, reference: 5 seeds)
run_stage finetune "$B_FT" "${H[@]}" bench --impl reference --suite finetune --profile "$FT_PROFILE" --device "$DEV" \
  --cases majority_class,reference --out "$RUN/finetune" --no-progress --time-budget-s @INNER_BUDGET@ "${RESUME[@]}"

# 6. finetune_swap is seeded with the stock model's rows, reused through --resume (not retrained):
# this run's finetune/, else HARNESS_SEED_FINETUNE (a results.jsonl), else (not when rehearsing) the
# committed baseline's, so that a rerun of finetune_swap alone on a fresh machine does not retrain them.
# Each finished seed is logged in finetune_swap/finetune_seeds.jsonl, which a --resume rerun reuses
SEED_FT="${HARNESS_SEED_FINETUNE:-}"
if [ -z "$SEED_FT" ] && [ "$REHEARSE" != 1 ]; then SEED_FT="$REPO/reports/baselines/gpu-h200/finetune/results.jsonl"; fi
if [ -s "$RUN/finetune/results.jsonl" ]; then SEED_FT="$RUN/finetune/results.jsonl"; fi
if wanted finetune_swap && [ "$DRY_RUN" != 1 ] && [ -n "$SEED_FT" ] && [ -s "$SEED_FT" ] \
   && [ ! -s "$RUN/finetune_swap/results.jsonl" ]; then
  mkdir -p "$RUN/finetune_swap"
  cp "$SEED_FT" "$RUN/finetune_swap/results.jsonl"
  echo "=== finetune_swap seeded with $SEED_FT"
fi
run_stage finetune_swap "$B_SWAP" "${H[@]}" bench --impl reference --suite finetune --profile "$FT_PROFILE" \
  --device "$DEV" --cases swap.sdpa,swap.layernorm --out "$RUN/finetune_swap" --no-progress --resume \
  --time-budget-s @INNER_BUDGET@

# 7. the pass/fail bench suites, into bench/ beside 1's rows (--resume keeps the rows of the suites
# it does not measure: harness/bench/store.py). timer_selfcheck first (3 s), then receptive_field
# (~23 s on the H200), kv_cache (~16 s a point) last. Their env.json replaces 1's, which is kept
# in logs/bench_scaling.env.json
if wanted bench_checks && [ "$DRY_RUN" != 1 ] && [ -f "$RUN/bench/env.json" ] \
   && [ ! -f "$RUN/logs/bench_scaling.env.json" ]; then
  cp "$RUN/bench/env.json" "$RUN/logs/bench_scaling.env.json"
fi
run_stage bench_checks "$B_CHECKS" "${H[@]}" bench --impl reference --suite timer_selfcheck,receptive_field,kv_cache \
  --profile "$BENCH_PROFILE" --device "$DEV" --out "$RUN/bench" --no-progress --time-budget-s @INNER_BUDGET@ --resume

exit 0
