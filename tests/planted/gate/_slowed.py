"""The built-in reference attention made a known factor slower, forward AND backward, for measuring
the baseline gate's missed-regression rate (issue 25; scripts/gate_rates.sh, notes/MEASUREMENTS.md).

``slowed(fn, factor)`` runs ``fn`` on all H heads, then runs it again on ``round((factor - 1) * H)`` of
the heads and adds ``0 * extra.sum()`` to the output: the output is unchanged, and the extra heads' work
is in the autograd graph, so the backward is slowed by the same fraction. With the bench's 4 heads,
factor 1.5 reruns 2 heads and 1.25 one head.
"""
from __future__ import annotations

from harness import reference


def slowed(fn, factor: float):
    def call(query, key, value, *args, **kwargs):
        out = fn(query, key, value, *args, **kwargs)            # (..., Hq, L, Ev)
        if factor <= 1.0:
            return out
        h = query.shape[-3]
        extra_q = max(1, round((factor - 1.0) * h))
        kv = key.shape[-3]
        extra_kv = max(1, round(extra_q * kv / h))
        extra = fn(query[..., :extra_q, :, :], key[..., :extra_kv, :, :], value[..., :extra_kv, :, :],
                   *args, **kwargs)
        return out + 0.0 * extra.sum()
    call.__name__ = fn.__name__
    return call


def names(factor: float) -> dict:
    return {"scaled_dot_product_attention": slowed(reference.scaled_dot_product_attention, factor),
            "sliding_window_attention": slowed(reference.sliding_window_attention, factor)}
