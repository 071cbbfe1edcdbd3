"""Helpers the attention suites share: calling the target, the float64 truth,
the tolerance policy, and the one-hot visibility probe."""
from __future__ import annotations

import torch

from harness.spec import tolerance
from harness.suites.attention.configs import AttnConfig
from harness.suites.kit import expect_tensor, require_features, resolved, submit
from harness.reference.attention import attention_math

SDPA = "scaled_dot_product_attention"
#: the magnitude masked keys and values are set to: a finite mask constant lets them leak
EXTREME = 1e4


def features_of(q, k, kw: dict) -> list[str]:
    """The ``HARNESS_UNSUPPORTED`` features an SDPA call with these arguments uses."""
    used = [f for f, on in (("attn_mask", kw.get("attn_mask") is not None),
                            ("dropout", bool(kw.get("dropout_p"))),
                            ("is_causal", bool(kw.get("is_causal"))),
                            ("enable_gqa", q.shape[-3] != k.shape[-3]),
                            ("scale", kw.get("scale") is not None)) if on]
    return used + [str(q.dtype).removeprefix("torch.")]


def call_sdpa(target, cfg: AttnConfig, q, k, v, **kw) -> torch.Tensor:
    """The target's SDPA on (q, k, v); output shape/dtype/device checked. A call that uses a
    feature the target declares unsupported raises ``Unsupported`` (the property is reported so)."""
    return submit_sdpa(target, cfg, q, k, v, **kw).result()


def submit_sdpa(target, cfg: AttnConfig, q, k, v, **kw):
    """``call_sdpa`` as a ``Pending`` (``submit``): ``agree`` and ``same`` read it after they
    computed the reference, which a worker overlaps with the target's call."""
    kw.setdefault("enable_gqa", q.shape[-3] != k.shape[-3])
    require_features(target, *features_of(q, k, kw))
    shape = (*q.shape[:-1], v.shape[-1])
    return submit(target, SDPA, q, k, v, **kw).then(lambda out: expect_tensor(out, SDPA, shape, q.dtype, q.device))


def truth(q, k, v, **kw) -> torch.Tensor:
    kw.setdefault("enable_gqa", q.shape[-3] != k.shape[-3])
    return attention_math(q.cpu(), k.cpu(), v.cpu(), **cpu_kwargs(kw))


#: where a correct kernel may apply the 1/sqrt(E) scale (reference.attention.attention_math)
SCALE_PLACEMENTS = ("scores", "query", "split")


def naive(q, k, v, **kw) -> torch.Tensor:
    """The same math in the input dtype, the policy's error yardstick: of the three places a
    correct kernel may put the scale, and the reverse order of the head dimension's sum, the one
    that rounds furthest from the truth (one formulation alone can land luckily close, e.g. with
    scores in the hundreds)."""
    kw.setdefault("enable_gqa", q.shape[-3] != k.shape[-3])
    qc, kc, vc = q.cpu(), k.cpu(), v.cpu()
    # the three placements sum q.k in one order, so they can be lucky together (scores in the
    # hundreds: a tiled kernel summing E in another order was 1.05e-5 off where they were 6.4e-7):
    # the same math with E summed in reverse order is a fourth candidate
    return tolerance.worst_naive(truth(q, k, v, **kw), [
        attention_math(qc, kc, vc, compute_dtype=q.dtype, scale_at=at, **cpu_kwargs(kw))
        for at in SCALE_PLACEMENTS] + [
        attention_math(qc.flip(-1), kc.flip(-1), vc, compute_dtype=q.dtype, **cpu_kwargs(kw))])


def cpu_kwargs(kw: dict) -> dict:
    return {k: (v.cpu() if isinstance(v, torch.Tensor) else v) for k, v in kw.items()}


def agree(out, q, k, v, what="output", **kw) -> tolerance.Comparison:
    """``out`` (or a ``submit_sdpa``, read after the reference is computed) equals
    attention(q, k, v, **kw) under the tolerance policy."""
    ref, nai = truth(q, k, v, **kw), naive(q, k, v, **kw)
    return tolerance.assert_close(resolved(out), ref, nai, dtype=q.dtype, what=what)


def allowance(q, k, v, **kw) -> float:
    """The error the tolerance policy allows for attention(q, k, v, **kw)."""
    ref, nai = truth(q, k, v, **kw), naive(q, k, v, **kw)
    return tolerance.allowance(ref, nai, dtype=q.dtype)


def same(a, b, q, k, v, what, **kw) -> None:
    """Two outputs of the target that must be equal: each may be off the truth
    by the policy's allowance, so their difference may be twice that (``a`` may be a
    ``submit_sdpa``, read after the allowance is computed)."""
    allowed = allowance(q, k, v, **kw)
    a = resolved(a)
    diff = (a.double().cpu() - b.double().cpu()).abs()
    bad = ~torch.isfinite(diff) & torch.isfinite(a.double().cpu())
    worst = float(diff[torch.isfinite(diff)].max()) if torch.isfinite(diff).any() else 0.0
    if bad.any() or worst > 2 * allowed:
        idx = tuple(int(i) for i in (bad if bad.any() else diff == diff.max()).nonzero()[0])
        raise AssertionError(f"{what}: outputs differ by {worst:.3e} at index {idx} "
                             f"(allowed {2 * allowed:.3e}, twice the tolerance policy's)")


def visibility(target, cfg: AttnConfig, **kw) -> torch.Tensor:
    """Which keys each query attends to, measured with a one-hot value probe.

    With Q = K = 0 every visible key gets the same score, so the output row of
    query i is 1/|visible(i)| at each visible key and 0 elsewhere (V = identity).
    Returns bool (*batch, Hq, L, S); rows returning NaN or zeros see nothing.
    """
    q, k, v = probe_inputs(cfg, target.device)
    return seen_keys(call_sdpa(target, cfg, q, k, v, **kw), cfg.S)


def probe_inputs(cfg: AttnConfig, device):
    """The one-hot value probe: Q = K = 0 (every visible key scores the same), V = identity
    over the S keys, so output row i holds 1/|visible(i)| at each key query i sees."""
    dt = cfg.torch_dtype
    q = torch.zeros(*cfg.batch, cfg.hq, cfg.L, cfg.E, dtype=dt, device=device)
    k = torch.zeros(*cfg.batch, cfg.hkv, cfg.S, cfg.E, dtype=dt, device=device)
    v = torch.eye(cfg.S, dtype=dt, device=device).expand(*cfg.batch, cfg.hkv, cfg.S, cfg.S).contiguous()
    return q, k, v


def seen_keys(out: torch.Tensor, S: int) -> torch.Tensor:
    """The probe's output read back as bool visibility; NaN or zero rows see nothing."""
    return out.float().nan_to_num(0.0) > 0.5 / S


def show_mask(m: torch.Tensor) -> str:
    """A small bool matrix as rows of 1/0 for failure messages."""
    rows = ["".join("1" if x else "." for x in r.tolist()) for r in m[:12]]
    return "\n      " + "\n      ".join(rows) + ("\n      ..." if m.shape[0] > 12 else "")


def extreme_like(t: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    sign = torch.randint(0, 2, t.shape, generator=g).to(t.device) * 2 - 1
    return (sign * EXTREME).to(t.dtype)


def poison(q, k, v, cols: torch.Tensor, g: torch.Generator, scale: float | None = None):
    """K and V at key positions ``cols`` set to +-1e4 (K shrunk, if needed, so that the raw
    scores q.k * scale, and q.k itself where scale < 1, stay below a quarter of the dtype's max:
    a correct kernel may scale after the product (Hugging Face eager attention forms q.k first),
    an overflow to inf *before* masking is no test of the mask, while scores this large still
    expose any finite mask constant such as -1e4 or -1e9 that is smaller than them)."""
    k2, v2 = k.clone(), v.clone()
    bad_k = extreme_like(k2[..., cols, :], g).double()
    scale = 1.0 / k.shape[-1] ** 0.5 if scale is None else scale
    qk = q.double() @ bad_k.repeat_interleave(q.shape[-3] // k.shape[-3], dim=-3).transpose(-2, -1)
    peak = float(qk.abs().max()) * max(scale, 1.0) if qk.numel() else 0.0
    cap = torch.finfo(k.dtype).max / 4
    if peak > cap:
        bad_k = bad_k * (cap / peak)
    k2[..., cols, :] = bad_k.to(k.dtype)
    v2[..., cols, :] = extreme_like(v2[..., cols, :], g)
    return k2, v2
