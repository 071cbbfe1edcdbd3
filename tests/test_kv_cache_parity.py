"""The kv_cache benchmark's decode parity (``harness.bench.kv_cache.decode_parity``): the logits
of a prefill + decode on the cache equal one full forward under the tolerance policy, and an
SDPA whose decode steps are wrong fails it."""
from __future__ import annotations

import pytest
import torch

pytest.importorskip("transformers")

from harness.bench.kv_cache import _model, decode_parity, generate  # noqa: E402
from harness.reference.attention import scaled_dot_product_attention as reference_sdpa  # noqa: E402

P = {"heads": 4, "head_dim": 8, "layers": 1, "batch": 2, "prompt": 4, "new_tokens": 5, "dtype": "float32",
     "intermediate": 32, "vocab": 64, "kv_heads": 2, "window": 4}


def _parity(case: str, sdpa) -> dict:
    out = generate(_model(case, P, "cpu", sdpa), P, "cpu")
    return decode_parity(case, P, out["fed"], out["logits"])


def last_key_dropped(query, key, value, attn_mask=None, **kw):
    """Wrong only where one query attends to a longer cache (a decode step): the last key is
    masked out, the query's own token."""
    if query.shape[-2] == 1 and key.shape[-2] > 1:
        keep = torch.ones(key.shape[-2], dtype=torch.bool)
        keep[-1] = False
        attn_mask = keep if attn_mask is None else attn_mask.bool() & keep if attn_mask.dtype == torch.bool \
            else attn_mask + torch.where(keep, 0.0, float("-inf")).to(attn_mask.dtype)
    return reference_sdpa(query, key, value, attn_mask=attn_mask, **kw)


@pytest.mark.parametrize("case", ["gqa", "rolling_window"])
def test_reference_decode_matches_the_full_forward(case):
    m = _parity(case, reference_sdpa)
    assert m["decode_parity"] and m["decode_max_abs_error"] <= m["decode_allowed_error"], m


def test_a_wrong_decode_step_fails_parity():
    m = _parity("gqa", last_key_dropped)
    assert not m["decode_parity"] and m["decode_max_abs_error"] > 100 * m["decode_allowed_error"], m
