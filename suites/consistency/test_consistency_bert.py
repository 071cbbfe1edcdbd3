"""Consistency of the BERT-pipeline names: the session's targets held to each other on the same
inputs (``distillation_loss`` at temperature 1 and another, ``build_inputs`` exactly, and the model
names ``build_model`` and ``bert_embeddings`` with the first target's weights loaded into every
module: ``suites/consistency/models.py``). How the targets are called and compared:
``suites/consistency/differential.py``.

    logits (B, V); input_ids, token_type_ids (L,); inputs_embeds (B, L, D)
"""
from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from harness.suites.bert.configs import distill_configs, embedding_configs, inputs_configs, model_configs
from harness.suites.bert.test_distillation import distillation_naive, distillation_truth
from harness.suites.consistency import models
from harness.suites.consistency.differential import Case, as_float64, not_compared, outputs_agree, policy
from harness.suites.kit import ImplementationError

#: the plug-in reads it: these tests hold targets to each other (the consistency section),
#: they are not properties of one target
CONSISTENCY = True
#: the family of protocol names this module compares (``harness/protocol.py``)
NAMES_OF = "bert"


def _distill_calls(cfg, device):
    s, t = cfg.logits(device)
    return [("temperature 1 (default)", (s, t), {}), (f"temperature {cfg.temperature:g}", (s, t),
                                                      {"temperature": cfg.temperature})]


def _distill_judge(cfg, label, args, kwargs, out_dtype):
    s, t = (a.cpu() for a in args)
    T = kwargs.get("temperature", 1.0)
    return as_float64, policy(distillation_truth(s, t, T), distillation_naive(s, t, T), s.dtype)


def _inputs_calls(cfg, device):
    a, b = cfg.sentences()
    return [("defaults", (a, b), {})]


def _joined(out) -> torch.Tensor:
    """(input_ids, token_type_ids) as one (2, L) tensor."""
    if not (isinstance(out, (tuple, list)) and len(out) == 2):
        raise ImplementationError(f"returned {type(out).__name__}, expected (input_ids, token_type_ids)")
    ids, types = (torch.as_tensor(o).detach().cpu().reshape(-1).to(torch.float64) for o in out)
    if ids.shape != types.shape:
        raise AssertionError(f"input_ids {tuple(ids.shape)} and token_type_ids {tuple(types.shape)} differ in length")
    return torch.stack([ids, types])


#: one differential check per record with ``compared`` (harness/protocol.py says how, in words)
CASES: dict[str, Case] = {
    "distillation_loss": Case(distill_configs(), _distill_calls, _distill_judge),
    "build_inputs": Case(inputs_configs(), _inputs_calls, lambda *a: (_joined, None)),
    "build_model": Case(model_configs(), models.calls(lambda cfg: ()), models.judge("build_model"),
                        invoke=models.invoke),
    "bert_embeddings": Case(embedding_configs(), models.calls(lambda cfg: (
        cfg.vocab_size, cfg.hidden_size, cfg.max_positions)), models.judge("bert_embeddings"), invoke=models.invoke),
}
#: the family's names with no differential check, and why (each record's ``not_compared``)
NOT_COMPARED = not_compared(NAMES_OF)


@pytest.mark.parametrize("name", [*CASES, *NOT_COMPARED])
@given(data=st.data())
def test_outputs_agree(loaded_targets, name, data):
    """The targets that define ``name`` give the same outputs on the same inputs."""
    outputs_agree(loaded_targets, name, data, CASES, NOT_COMPARED)
