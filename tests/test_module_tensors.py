"""One reading of each tensor the suites inspect in a target's module (harness/boundary/module_tensors.py).

A ``LearnedPositionEmbedding`` that keeps its table as ``self.table = nn.Embedding(...)`` used to
pass ``learned_positions.lookup`` (which wrote "its one parameter of that shape") and fail
``position_grad.embedding_sum`` ("the module has no tensor .weight to differentiate"): two
readings of one object. Every learned-positions property now passes it; a norm that keeps its
weight under another name than the protocol's (torch.nn's ``.weight``) gets the same message
from its forward and its gradient properties.
"""
from __future__ import annotations

import pytest
import torch
from torch import nn

from harness.boundary import module_tensors
from tests.planted_support import run_suite

TABLE_AS_EMBEDDING = '''
import torch
from torch import nn


class LearnedPositionEmbedding(nn.Module):
    """Correct: the table is an nn.Embedding kept as .table (no .weight attribute)."""

    def __init__(self, max_positions, dim):
        super().__init__()
        self.max_positions = max_positions
        self.table = nn.Embedding(max_positions, dim)

    def forward(self, positions):
        if positions.numel() and int(positions.max()) >= self.max_positions:
            raise IndexError("position out of range")
        return self.table(positions)
'''

GAIN_LAYERNORM = '''
import torch
from torch import nn


class LayerNorm(nn.Module):
    """Correct math, but the scale is .gain and the shift .shift, not torch.nn's .weight/.bias."""

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True):
        super().__init__()
        shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        self.shape, self.eps = shape, eps
        self.gain = nn.Parameter(torch.ones(shape)) if elementwise_affine else None
        self.shift = nn.Parameter(torch.zeros(shape)) if elementwise_affine else None

    def forward(self, x):
        return nn.functional.layer_norm(x, self.shape, self.gain, self.shift, self.eps)
'''


def test_a_table_under_another_name_passes_every_learned_positions_property(pytester, tmp_path):
    path = tmp_path / "table_as_embedding.py"
    path.write_text(TABLE_AS_EMBEDDING)
    result = run_suite(pytester, ["test_learned_positions.py", "test_position_grad.py"], [path],
                       "lookup or out_of_range or embedding_sum")
    result.assert_outcomes(passed=3)


def test_a_norm_weight_under_another_name_gets_one_message_from_forward_and_gradient(pytester, tmp_path):
    """The protocol requires torch.nn's names for a norm's tensors: the forward property and the
    gradient property both fail with the rule, not with two different readings."""
    path = tmp_path / "gain_layernorm.py"
    path.write_text(GAIN_LAYERNORM)
    result = run_suite(pytester, ["test_layernorm.py", "test_norm_grad.py"], [path],
                       "test_affine or (test_norm_grad and test_layernorm)")
    result.assert_outcomes(failed=2)
    out = result.stdout.str()
    rule = "LayerNorm has no tensor .weight (got NoneType); the protocol reads its weight there, " \
           "as torch.nn.LayerNorm names it"
    assert out.count(rule) >= 2, out[-3000:]


# ---- the accessor itself -----------------------------------------------------------------------

class _Wrapped(nn.Module):
    def __init__(self):
        super().__init__()
        self.pe = nn.Module()
        self.pe.emb = nn.Embedding(7, 3)


def test_learned_table_is_weight_else_the_one_parameter_of_its_shape():
    assert module_tensors.locate(nn.Embedding(7, 3), "LearnedPositionEmbedding", "table", (7, 3)) == "weight"
    mod = _Wrapped()
    path = module_tensors.locate(mod, "LearnedPositionEmbedding", "table", (7, 3))
    assert path == "pe.emb.weight" and path in dict(mod.named_parameters())
    ones = torch.ones(7, 3, dtype=torch.float64)
    written, dtype = module_tensors.write(mod, "LearnedPositionEmbedding", "table", ones)
    assert written == path and dtype == torch.float32 and torch.equal(mod.pe.emb.weight, torch.ones(7, 3))
    mod.other = nn.Parameter(torch.zeros(7, 3))
    with pytest.raises(AssertionError, match=r"2 parameters of that shape \(other, pe.emb.weight\)"):
        module_tensors.locate(mod, "LearnedPositionEmbedding", "table", (7, 3))


def test_required_names_are_required():
    ln = nn.LayerNorm((2, 3))
    assert module_tensors.locate(ln, "LayerNorm", "bias", (2, 3)) == "bias"
    with pytest.raises(AssertionError, match=r"'s \.weight has shape \(2, 3\), expected \(6,\)"):
        module_tensors.locate(ln, "LayerNorm", "weight", (6,))
    t5 = nn.Module()
    t5.relative_attention_bias = nn.Embedding(32, 4)
    assert module_tensors.locate(t5, "T5RelativePositionBias", "table", (32, 4)) == "relative_attention_bias.weight"
    t5_other = nn.Module()
    t5_other.bias_table = nn.Embedding(32, 4)  # its one (32, 4) parameter does not count: the name is required
    with pytest.raises(AssertionError, match=r"no tensor \.relative_attention_bias\.weight"):
        module_tensors.locate(t5_other, "T5RelativePositionBias", "table", (32, 4))


def test_the_finetune_benchmark_writes_a_layernorm_where_the_suites_do():
    """The benchmark's LayerNorm swap copies the pretrained weight and bias through the same
    accessor: torch.nn's names, and the same rule's message for a norm that uses others."""
    from harness.bench.finetune_train import swap_layernorms
    from harness.reference import LayerNorm
    model = nn.Sequential(nn.Linear(4, 4), nn.LayerNorm(4))
    with torch.no_grad():
        model[1].weight.copy_(torch.arange(4.0))
        model[1].bias.copy_(-torch.arange(4.0))
    assert swap_layernorms(model, LayerNorm, 1e-5) == 1
    assert isinstance(model[1], LayerNorm) and torch.equal(model[1].weight.detach().float(), torch.arange(4.0))
    assert torch.equal(model[1].bias.detach().float(), -torch.arange(4.0))
    namespace: dict = {}
    exec(GAIN_LAYERNORM, namespace)  # noqa: S102 - the test's own source
    with pytest.raises(TypeError, match=r"LayerNorm has no tensor \.weight .* as torch.nn.LayerNorm names it"):
        swap_layernorms(nn.Sequential(nn.LayerNorm(4)), namespace["LayerNorm"], 1e-5)
