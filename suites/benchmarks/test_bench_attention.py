"""The scaling benchmark through pytest-benchmark:

    pytest suites/benchmarks --impl reference --benchmark-json out.json

These tests are skipped unless benchmarks are asked for -- ``--benchmark-json``,
``--benchmark-only``, ``--benchmark-enable`` or ``HARNESS_BENCHMARKS=1`` -- so a plain
``pytest suites`` (the conformance run) does not pay for them. The cases and inputs
are ``harness.bench.scaling``'s (small sizes); each test's ``extra_info`` holds the
point's params and FLOP count, which ``harness report`` reads from the JSON
(suite "pytest-benchmark").
"""
from __future__ import annotations


import pytest
import torch

from harness.basics import extras
from harness.bench import Context, profiles
from harness.bench.points import Skip
from harness.bench.scaling import flops_for, make_call, params_for
from harness.basics.scope import benchmarks_requested

PROPERTY_PREFIX = "benchmark"
CASES = ["target.sdpa", "reference.naive", "torch.sdpa.math", "torch.sdpa.flash", "banded_window",
         "target.sliding_window", "lstm"]
SIZES = [256, 512, 1024]


@pytest.fixture(autouse=True)
def _only_when_requested(request):
    if not benchmarks_requested(request.config):
        pytest.skip("benchmarks run only with --benchmark-json/--benchmark-only/--benchmark-enable "
                    "or HARNESS_BENCHMARKS=1")
    if not request.config.pluginmanager.hasplugin("benchmark"):  # (its `benchmark` fixture: a set-up error)
        pytest.skip(extras.missing_line("pytest_benchmark"))


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("case", CASES)
def test_scaling(target, case, n, benchmark, device):
    prof = profiles.get("cpu").scaling
    ctx = Context(target=target, impl=target.spec, device=target.device or device,
                  profile=profiles.get("cpu"), store=None)
    p = params_for(case, n, prof, ctx.device)
    try:
        call = make_call(ctx, case, p)
    except Skip as exc:
        pytest.skip(str(exc))
    benchmark.group = f"scaling {case}"
    benchmark.extra_info.update(suite="scaling", case=case, params=p, flops=flops_for(case, p))
    with torch.inference_mode():
        out = benchmark(call)
    assert torch.isfinite(out).all(), f"{case} returned non-finite values at n={n}"
