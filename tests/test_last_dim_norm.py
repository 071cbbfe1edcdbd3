"""``harness.adapters.last_dim_norm``: the one wrapper the norm adapters share (transformers', liger's,
fla's and torchtune's norms, each over one last dim, under the protocol's constructors)."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from harness.adapters.last_dim_norm import LastDimNorm, features, shape_of


class Scaled(nn.Module):
    """A library-style norm over the last dim whose weight is called ``scale``."""

    def __init__(self, n, eps):
        super().__init__()
        self.scale, self.eps = nn.Parameter(torch.ones(n)), eps

    def forward(self, x):
        return x / x.pow(2).mean(-1, keepdim=True).add(self.eps).sqrt() * self.scale


def test_trailing_dims_are_flattened_and_the_weight_is_the_library_s():
    norm = LastDimNorm(Scaled(features((2, 3)), 1e-6), (2, 3), eps=1e-6, elementwise_affine=True,
                       weight="scale", bias=None)
    assert shape_of(4) == (4,) and features((2, 3)) == 6 and norm.bias is None
    assert norm.weight.shape == (2, 3)
    with torch.no_grad():
        norm.weight[1, 2] = 5.0  # writes the library's parameter (a view)
    assert norm.inner.scale[5] == 5.0
    x = torch.randn(4, 2, 3, dtype=torch.float64)
    flat = x.reshape(4, 6)
    expected = (flat / flat.pow(2).mean(-1, keepdim=True).add(1e-6).sqrt() * norm.inner.scale).reshape(4, 2, 3)
    torch.testing.assert_close(norm(x), expected.to(norm(x).dtype))


def test_without_affine_the_library_weight_is_frozen_and_hidden():
    norm = LastDimNorm(Scaled(5, 1e-6), 5, eps=1e-6, elementwise_affine=False, weight="scale", bias=None)
    assert norm.weight is None and not norm.inner.scale.requires_grad


def test_a_wrong_trailing_shape_is_a_clear_error():
    norm = LastDimNorm(Scaled(6, 1e-6), (2, 3), eps=1e-6, elementwise_affine=True, weight="scale")
    with pytest.raises(ValueError, match=r"does not end in normalized_shape \(2, 3\)"):
        norm(torch.randn(4, 3, 2))


def test_op_norm_classes_feed_one_node_the_modules_parameters():
    """A graph runtime's norms (``onnx_norms``, ``ort_norms``): each call runs one node, named, over x
    flattened to the last dim, with the module's weight (and bias) and eps; RMSNorm's eps=None is the
    runtime's default."""
    from harness.adapters.last_dim_norm import op_norm_classes

    seen = []

    def run(op, x, eps, *params):
        seen.append((op, tuple(x.shape), eps, [tuple(p.shape) for p in params]))
        return x * 2

    LayerNorm, RMSNorm = op_norm_classes(run, "LayerNormalization", "RMSNormalization", 1e-5)
    x = torch.randn(3, 2, 4)
    assert torch.equal(LayerNorm((2, 4), eps=1e-3)(x), x * 2)
    rms = RMSNorm(4)
    rms(x)
    assert seen == [("LayerNormalization", (3, 8), 1e-3, [(8,), (8,)]), ("RMSNormalization", (3, 2, 4), 1e-5, [(4,)])]
    assert rms.eps == 1e-5 and rms.weight.shape == (4,) and rms.bias is None
