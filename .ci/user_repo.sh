#!/usr/bin/env bash
# The harness as a user meets it (issue 41): the wheel built from this checkout, installed in a fresh
# virtual environment, used from a repository of the user's own that has its own suites/ and reports/
# packages and a reference.py. The steps are the `run:` steps of docs/examples/conformance.yml (the
# workflow the README's "Use it from your project's CI" section gives), run as written; then what the
# workflow cannot show: a failure not listed in the xfails file fails the run, its repro line replays
# it, and the user's own `pytest suites` is untouched.
#
#   .ci/user_repo.sh [CONSTRAINTS]     (run by .ci/run; needs the python of CI's venv for the build)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
constraints="$(cd "$here" && realpath "${1:-.ci/constraints.txt}")"  # (absolute: the workflow steps run in the user's folder)
work=$(mktemp -d /tmp/harness-user-XXXXXX)
trap 'rm -rf "$work"' EXIT
fail() { echo "user_repo: FAIL: $*" >&2; exit 1; }

echo "--- the wheel, from this checkout"
python -m pip wheel -q --no-deps -w "$work/dist" "$here" 2>&1 | grep -v "^WARNING: Location" || true
wheel=$(ls "$work"/dist/*.whl)
tops=$(python -m zipfile -l "$wheel" | awk 'NR>1 {print $1}' | cut -d/ -f1 | grep -v '\.dist-info$' | sort -u | tr '\n' ' ')
[ "$tops" = "harness " ] || fail "the wheel installs top-level names other than harness: $tops"

# the workflow's `run:` steps, in order, as written (read with PyYAML, which CI's venv has)
steps="$work/steps"
mkdir -p "$steps"
python - "$here/docs/examples/conformance.yml" "$steps" <<'PY'
import pathlib, sys, yaml
flow = yaml.safe_load(open(sys.argv[1]))
runs = [s for s in flow["jobs"]["conformance"]["steps"] if "run" in s]
for i, s in enumerate(runs):
    pathlib.Path(sys.argv[2], f"{i}-{s['name'].replace(' ', '_')}.sh").write_text("set -euo pipefail\n" + s["run"])
PY

echo "--- a user's repository, outside the checkout (its own suites/, reports/, reference.py)"
cp -r "$here/.ci/user_repo" "$work/user"
cd "$work/user"
"${CI_PYTHON:-python3}" -m venv "$work/venv"
# shellcheck disable=SC1091
source "$work/venv/bin/activate"
export PIP_CONSTRAINT="$constraints" PIP_DISABLE_PIP_VERSION_CHECK=1
# the workflow's parameters, pointed at this machine: the wheel just built, torch from the registry
export HARNESS_PACKAGE="transformer-conformance-harness[job] @ file://$wheel" TORCH_PIP_ARGS="" IMPL=mykernels

step() { echo "--- workflow step: $1"; bash "$steps"/*-"$1".sh; }

step install
python -c "import harness, importlib.util as u; assert u.find_spec('harness.suites').origin.startswith('$work/venv'), 'harness.suites not from the wheel'"
step conformance
python - <<'PY' || fail "the known failure is not in the conformance report as known"
import json
kinds = {(r["property"], r["kind"]) for r in json.load(open("out/conformance/conformance.json"))["results"]}
assert ("rmsnorm.scale_invariance", "known") in kinds, sorted(kinds)
PY
step benchmarks
# docs/ci.md: a baseline is a bench run folder kept in the repository, made once. Made here from the
# run just measured, the gate's step must compare every target point and pass: this proves the
# recipe (a baseline by path in the user's repository, the report, the gate's exit status), not the
# timings of a loaded machine (the gate's false-regression rates are measured: docs/reports.md)
mkdir -p ci/baselines && cp -r out/bench ci/baselines/cpu
step gate  # exit 0: points compared, no regression (2 would mean nothing compared)

echo "--- a failure not listed fails the run, and names its repro"
set +e
python -m harness check --impl "$IMPL" -k rmsnorm > "$work/check.log" 2>&1; rc=$?
set -e
[ "$rc" = 1 ] || { tail -40 "$work/check.log"; fail "check without --xfails exited $rc, expected 1"; }
repro=$(grep -m1 -o "python -m harness repro .*" "$work/check.log") || fail "no repro line in the failure"
echo "$repro"
set +e
bash -c "$repro" > "$work/repro.log" 2>&1; rc=$?
set -e
[ "$rc" = 1 ] && grep -q "^FAILED" "$work/repro.log" || { cat "$work/repro.log"; fail "the repro line did not replay the failure (exit $rc)"; }
echo "--- the pytest form, with the xfails file"
python -m pytest --pyargs harness.suites --impl "$IMPL" --xfails ci/harness-xfails.txt -k rmsnorm -q -p no:cacheprovider \
  > "$work/pytest.log" 2>&1 || { tail -30 "$work/pytest.log"; fail "pytest --pyargs harness.suites with --xfails failed"; }
grep -q "xfailed" "$work/pytest.log" || fail "pytest --pyargs harness.suites: no xfailed test"

echo "--- the user's own packages are theirs"
python -m pytest suites -q -p no:cacheprovider > "$work/own.log" 2>&1 || { cat "$work/own.log"; fail "the user's own 'pytest suites' failed"; }
grep -q "1 passed" "$work/own.log" || fail "the user's own 'pytest suites' did not run its test"
if grep -qE "^harness |^target " "$work/own.log"; then cat "$work/own.log"; fail "the user's own pytest run got a harness session"; fi
python -c "import os, suites, reports, reference; assert reports.OWNER == reference.OWNER == 'user'; assert suites.__file__.startswith(os.getcwd())" \
  || fail "python in the user's folder does not import the user's own suites, reports, reference"
python -m harness docs ci > /dev/null || fail "python -m harness docs ci"
echo "user_repo: ok (the wheel's one top-level package; the workflow's steps; xfails; repro; the user's own names untouched)"
