"""THE constants of the baseline gate's decision rule, shared by the bench (a row records the
slowdown its own spread lets the gate detect) and the gate (``reports/gate.py``,
``reports/decide.py``). A leaf module: no torch, no pandas.

Time-derived metrics (time_s, tflops, tokens_per_s), per point:

- The spread ``s`` of a measurement is its relative repeat-to-repeat spread, ``time_iqr_s / time_s``
  over the point's repeats. Two medians are only as comparable as the noisier of them, so a
  comparison takes ``s = max(s_baseline, s_run)``. A baseline of several runs
  (``reports.baseline_runs``) has for ``s`` the larger of its runs' own and their between-run spread.
- The allowed change ``tol = max(floor, K_SPREAD * s)``, the floor ``TIME_FLOOR[device kind]`` or, for
  a suite measured to move more between runs, ``SUITE_TIME_FLOOR[(device kind, suite)]``. The floor is the
  between-run allowance that one run's repeats do not see (between two quiet runs a minute apart a
  target's backward moved +35 % net of drift on this 2-core VM, 5 repeats, issue 25). ``tol`` is the
  slowdown the point can detect (``detectable``).
- A point whose ``tol`` is over ``GATE_SLOWDOWN[device kind]`` cannot detect the slowdown the gate
  promises to catch: unless it moved beyond ``tol`` it is "undecided (spread X %)", never "ok".
- Where both runs stored their repeats (``time_samples_s``) and a one-sided rank test
  (Mann-Whitney) over them can reach ``ALPHA`` at all, a change beyond ``tol`` is a regression only
  when the run's repeats are slower than the baseline's (net of the suite's drift) at ``p < ALPHA``;
  otherwise it is undecided. With 5 repeats each the smallest p is 1/252 = 0.004.

CPU peak memory: a value under the probe's resolution (``peak_mem_resolution_bytes``; rows written
before it existed: ``LEGACY_RESOLUTION_BYTES``) and a baseline of 0 bytes are never compared:
"undecided (below resolution)".
"""
from __future__ import annotations

K_SPREAD = 2.0
#: the between-run allowance by device kind (module doc)
TIME_FLOOR = {"cpu": 0.25, "cuda": 0.10}
#: suites whose points move more between two quiet runs than within one (10 quiet runs against one
#: baseline, notes/MEASUREMENTS.md "The gate as rates"): the KV-cache decode is ~5 ms steps of many
#: small ops in a model built anew per point, and its runs' medians moved -15 to +31 % net of the
#: drift while each run's own repeats spread 2-20 %
SUITE_TIME_FLOOR = {("cpu", "kv_cache"): 0.40}
#: the slowdown the gate promises to detect, by device kind (a 1.5x slower attention on a CPU)
GATE_SLOWDOWN = {"cpu": 0.50, "cuda": 0.25}
#: the rank test's level (one-sided)
ALPHA = 0.01
#: a time regression must also exceed the run's own machine noise: this many robust standard
#: deviations (1.4826 x MAD) of the log time ratios of the comparison kernels it is judged net of,
#: in its (run, suite, device, pass) group. A quiet machine's noise is small and the floors decide;
#: under contention the points move by different factors (notes/MEASUREMENTS.md "The gate as
#: rates": 6 of 10 busy runs of the unchanged reference failed without it, 0 of 10 with it, while
#: a 1.5x slower target, replayed from the same runs, was named in 10 of 10)
NOISE_SIGMAS = 3.0
#: the CPU memory probe's resolution before rows recorded theirs (blocks mmapped from 1 MiB)
LEGACY_RESOLUTION_BYTES = 1 << 20
UNDECIDED_RESOLUTION = "undecided (below resolution)"
UNDECIDED_SPREAD = "undecided (spread)"


def device_kind(device) -> str:
    return "cuda" if str(device).startswith("cuda") else "cpu"


def time_floor(device="cpu", suite: str | None = None) -> float:
    """The between-run allowance of a time point of ``suite`` on ``device``."""
    kind = device_kind(device)
    return SUITE_TIME_FLOOR.get((kind, suite), TIME_FLOOR[kind])


def detectable(spread: float, device="cpu", suite: str | None = None) -> float:
    """The relative slowdown a point of ``suite`` with relative spread ``spread`` can detect (``tol``)."""
    return max(time_floor(device, suite), K_SPREAD * abs(spread))


def decides(tol: float, device="cpu") -> bool:
    """Whether a point allowed ``tol`` can detect the gate's stated slowdown."""
    return tol <= GATE_SLOWDOWN[device_kind(device)] + 1e-12


def undecided_spread(spread: float) -> str:
    """The verdict of a point too noisy to decide, e.g. "undecided (spread 31 %)"."""
    return f"undecided (spread {abs(spread) * 100:.0f} %)"


def is_undecided(verdict) -> bool:
    return str(verdict).startswith("undecided")


def verdict_kind(verdict) -> str:
    """A verdict's summary bucket: "undecided (spread X %)" counts as "undecided (spread)"."""
    v = str(verdict)
    return UNDECIDED_SPREAD if v.startswith("undecided (spread") else v


def time_detectable_metrics(metrics: dict, device, suite: str | None = None) -> dict:
    """What a bench row records about its own spread: ``time_detectable_slowdown`` (the relative
    slowdown of ``time_s`` this point can detect against a run as quiet as itself), from its
    ``time_iqr_s``; {} without both numbers."""
    t, iqr = metrics.get("time_s"), metrics.get("time_iqr_s")
    if not isinstance(t, (int, float)) or not isinstance(iqr, (int, float)) or not t or t != t or iqr != iqr:
        return {}
    return {"time_detectable_slowdown": detectable(iqr / t, device, suite)}
