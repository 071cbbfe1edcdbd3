"""Where tensors live, checked without a GPU.

The first CUDA run (reports/baselines/gpu-h200/) found three failures that a CPU run cannot see,
since every tensor is on the CPU there: a reference module that made its output on the CPU
whatever its own device, a suite that added a CPU tensor to the target's, and the pipe to the
target's worker, which could not copy an expanded (stride-0) CUDA tensor. The meta device stands
in for "a device that is not the CPU": a module moved there must answer there, and the copy
that keeps strides must keep stride 0 and overlap.
"""
from __future__ import annotations

import pytest
import torch

from harness import reference
from harness.boundary import wire

META = torch.device("meta")

#: each reference module: (build, the forward's arguments on a device, the output's shape).
#: LearnedPositionEmbedding is not here: it checks the positions' values (no data on meta), and
#: its output is its own weight indexed, on the weight's device by construction.
MODULES = {
    "AlibiPositionalBias": (lambda: reference.AlibiPositionalBias(4), lambda d: (3, 5), (4, 3, 5)),
    "T5RelativePositionBias": (lambda: reference.T5RelativePositionBias(4), lambda d: (3, 5), (4, 3, 5)),
    "RotaryEmbedding": (lambda: reference.RotaryEmbedding(8), lambda d: (torch.randn(1, 2, 3, 8, device=d),),
                        (1, 2, 3, 8)),
    "LayerNorm": (lambda: reference.LayerNorm(8), lambda d: (torch.randn(2, 8, device=d),), (2, 8)),
    "RMSNorm": (lambda: reference.RMSNorm(8), lambda d: (torch.randn(2, 8, device=d),), (2, 8)),
}


@pytest.mark.parametrize("name", sorted(MODULES))
def test_a_reference_module_answers_on_its_own_device(name):
    build, args, shape = MODULES[name]
    mod = build().to(META)
    out = mod(*args(META))
    assert out.device == META, f"{name} moved to meta returned a tensor on {out.device}"
    assert tuple(out.shape) == shape


def test_the_planted_module_that_ignores_its_device_is_caught():
    """The check above can fail: ALiBi as it was before the CUDA run (no buffer: made on the CPU)."""
    class CpuOnly(torch.nn.Module):
        def forward(self, query_len, key_len):
            return reference.alibi_bias(4, query_len, key_len)

    assert CpuOnly().to(META)(3, 5).device.type == "cpu"


@pytest.mark.parametrize("make", [
    lambda: torch.randn(2, 1, 5, 4).expand(2, 3, 5, 4),            # MQA: one KV head, stride 0
    lambda: torch.randn(3, 10)[:, 2:6],                             # last-dim-contiguous slice of wider rows
    lambda: torch.randn(4, 6).t(),                                  # transposed
    lambda: torch.randn(7)[2:].as_strided((3, 3), (1, 1)),          # overlapping windows, with an offset
    lambda: torch.randn(0, 3).expand(2, 0, 3),                      # empty
], ids=["expanded", "slice", "transposed", "overlapping", "empty"])
def test_the_wire_copy_keeps_strides_and_values(make):
    t = make()
    out = wire._restrided(t, "cpu")
    assert out.stride() == t.stride() and out.shape == t.shape
    assert torch.equal(out, t)
    if t.numel():
        assert out.untyped_storage().data_ptr() != t.untyped_storage().data_ptr()  # a copy, not a view
    on_meta = wire._restrided(t, "meta")
    assert on_meta.device == META and on_meta.stride() == t.stride()


def test_empty_strided_copy_refuses_stride_0_which_is_why_the_wire_copies_the_span():
    """What the old copy did, kept as the reason for the span copy: it raises on an expanded tensor."""
    t = torch.randn(2, 1, 5, 4).expand(2, 3, 5, 4)
    with pytest.raises(RuntimeError, match="single memory location"):
        torch.empty_strided(t.size(), t.stride()).copy_(t)
