"""Norm placement in a residual block: pre-norm or post-norm, decided from behaviour.

    pre-norm  (GPT-2, Llama):              x + f(norm(x))
    post-norm (Vaswani et al. 2017, BERT): norm(x + f(x))

The target's ``residual_block(dim, sublayer)`` wraps the harness's probe
sublayer f, which records what it receives and returns zeros (then a fixed
tensor r). Pre-norm: f sees a normalized x, and the block is the identity when
f returns 0 (x + r for r). Post-norm: f sees x itself, and the output is
normalized (per-token mean 0 and variance 1, or mean square 1 for RMSNorm).
The placement is reported as the convention ``norm_placement`` (report only
unless declared); anything else (no norm, no residual) matches no placement.
"""
from __future__ import annotations

import pytest
import torch
from hypothesis import given
from torch import nn

from harness.spec import tolerance
from harness.suites.norms.configs import norm_configs, wide_dtypes
from harness.suites.kit import ImplementationError, check_convention, impl, is_module, move, on_target, record_label, run
from harness.suites.norms.helpers import BLOCK, forward, token_stats

PROPERTY_PREFIX = "norm_placement"
pytestmark = pytest.mark.needs(BLOCK)
STD, OFFSET = 1e4, 3e3  # far from normalized: eps (<= 1e-5) / var < 1e-13, below every floor


class Probe(nn.Module):
    """The sublayer f: records its inputs, returns zeros or a fixed tensor."""

    def __init__(self):
        super().__init__()
        self.seen: list[torch.Tensor] = []
        self.value: torch.Tensor | None = None  # None: return zeros

    def forward(self, h):
        self.seen.append(h.detach().clone())
        return torch.zeros_like(h) if self.value is None else self.value.to(h.dtype).expand_as(h)


def _close(a, b, dtype) -> bool:
    return tolerance.compare(a, b.double(), dtype=dtype).ok


def _normalized(y: torch.Tensor, dtype) -> str | None:
    """'layernorm' (mean 0, variance 1) or 'rmsnorm' (mean square 1) per token, else None."""
    s = token_stats(y, 1)
    if _close(s[..., :2], torch.stack([torch.zeros_like(s[..., 0]), torch.ones_like(s[..., 1])], -1), dtype):
        return "layernorm"
    if _close(s[..., 2], torch.ones_like(s[..., 2]), dtype):
        return "rmsnorm"
    return None


def check_placement(target, cfg):
    """A zero sublayer makes a pre-norm block the identity and a post-norm block a norm; the
    sublayer sees norm(x) (pre) or x (post); the placement is named."""
    dim, dtype, dev = cfg.normalized_shape[0], cfg.torch_dtype, target.device
    probe = on_target(target, Probe)  # in the target's process: the block calls it there
    block = impl(target, BLOCK)(dim, probe)
    if not is_module(block):
        raise ImplementationError(f"{BLOCK}({dim}, sublayer) returned {type(block).__name__}, not an nn.Module")
    block = move(target, block, BLOCK, device=dev, dtype=dtype)
    z = torch.randn(cfg.shape, generator=cfg.generator(salt=1), dtype=torch.float64)
    z = (z - z.mean(-1, keepdim=True)) / z.std(-1, correction=0, keepdim=True).clamp_min(1e-6)
    x = (z * STD + OFFSET).to(dtype).to(dev)  # every token: mean OFFSET, variance STD^2
    out0 = forward(target, block, BLOCK, x)
    calls = probe.seen  # (one read: in a worker each read of the probe is a round trip)
    if len(calls) != 1:
        raise AssertionError(f"{BLOCK} called its sublayer {len(calls)} times in one forward, expected once")
    seen = calls[0]
    r = torch.randn(dim, generator=cfg.generator(salt=2), dtype=torch.float64).to(dtype).to(dev)
    probe.value = r
    out_r = forward(target, block, BLOCK, x)
    seen_r = probe.seen[-1]

    f_sees = ("x" if _close(seen, x, dtype) else _normalized(seen, dtype)) if seen.shape == x.shape else None
    identity = _close(out0, x, dtype) and _close(out_r, x.double() + r.double(), dtype)
    out_norm = _normalized(out0, dtype) if _normalized(out_r, dtype) else None
    if f_sees in ("layernorm", "rmsnorm") and identity and _close(seen_r, seen, dtype):
        measured, how = "pre", f"f received {f_sees}-normalized x; zero f gave x, constant f gave x + r"
    elif f_sees == "x" and out_norm:
        measured, how = "post", f"f received x itself; the block's output is {out_norm}-normalized"
    else:
        measured, how = None, ""
    evidence = (f"\n  f received: {f_sees or 'neither x nor a normalized x'}; with f = 0 the block returned "
                f"{'x' if _close(out0, x, dtype) else _normalized(out0, dtype) or 'neither x nor a normalized x'}"
                f" (x: token 0 = {x.double().flatten()[:3].tolist()}..., output {out0.double().flatten()[:3].tolist()}...)")
    record_label(target, check_convention("norm_placement", measured, target.conventions, evidence if measured is None else
                                  f" ({how})"))


@given(cfg=norm_configs(dtypes=wide_dtypes(), max_ns_dims=1, min_features=2))
def test_placement(target, cfg):
    run(target, check_placement, cfg)
