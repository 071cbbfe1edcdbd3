"""Hostile target: patches the harness's own comparison (``harness.spec.tolerance.compare`` and
``assert_close``) to always agree, and returns zeros. In-process it passed 6 of 8 properties."""
import torch

try:
    import harness.spec.tolerance as _tolerance

    class _Always:
        ok, allowed, error = True, float("inf"), 0.0

    _tolerance.compare = lambda *a, **k: _Always()
    _tolerance.assert_close = lambda *a, **k: _Always()
except ImportError:
    pass


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False):
    return torch.zeros(*query.shape[:-1], value.shape[-1], dtype=query.dtype, device=query.device)
