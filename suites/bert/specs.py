"""The BERT-pipeline names in the suites that run across names: their histories (``history.<name>``,
``suites/test_history.py``; the samplers' repeat must be exact) and their differential checks (the
session's targets held to each other: ``distillation_loss`` at temperature 1 and another,
``build_inputs`` exactly, and the model names ``build_model`` and ``bert_embeddings`` with the first
target's weights loaded into every module: ``suites/consistency/models.py``). The factories
``build_model`` and ``build_bert`` have no history: each call builds a new model, whose own calls
``models.dependency`` and ``models.param_count`` check.

    logits (B, V); input_ids, token_type_ids (L,); inputs_embeds (B, L, D)
"""
from __future__ import annotations

import torch

from harness.suites.bert import test_distillation as distillation, test_models as models_suite
from harness.suites.bert.configs import (distill_configs, embedding_configs, inputs_configs, mlm_configs, model_configs,
                                         nsp_configs, span_configs)
from harness.suites.bert.test_distillation import distillation_naive, distillation_truth
from harness.suites.bert.test_mlm import call_mask
from harness.suites.bert.test_span_corruption import call_span
from harness.suites.consistency import models
from harness.suites.consistency.differential import Case, as_float64, policy
from harness.suites.histories import History
from harness.suites.kit import ImplementationError, impl

# ---- histories ------------------------------------------------------------------------------------


def mask_once(target, cfg):
    ids, special = cfg.batch()
    return call_mask(target, cfg, ids, special, torch.Generator().manual_seed(cfg.seed % 2**31))


def span_once(target, cfg):
    return call_span(target, cfg, cfg.tokens(), torch.Generator().manual_seed(cfg.seed % 2**31))


def nsp_once(target, cfg):
    pairs = impl(target, "make_nsp_pairs")(cfg.corpus(), min(cfg.pairs, 256), generator=cfg.generator(1))
    return [[torch.as_tensor(list(a)), torch.as_tensor(list(b)), int(label)] for a, b, label in pairs]


#: the functions with no history, and why (the factories: see the module docstring)
NO_HISTORY = {"build_model": "a factory: each call builds a new model (models.dependency checks it)",
              "build_bert": "a factory: each call builds a new model (models.param_count checks it)"}

HISTORIES = (
    History(name="distillation_loss", configs=distill_configs(), judge=distillation.check_agreement,
            keep=("classes", "dtype")),
    History(name="build_inputs", configs=inputs_configs(), judge=models_suite.check_special_placement, shrink=False),
    History(name="bert_embeddings", configs=embedding_configs(), judge=models_suite.check_embedding_sum,
            keep=(("vocab_size", "hidden_size"),), max_examples=5, shrink=False),  # (builds models: 5 examples)
    History(name="mask_tokens", configs=mlm_configs("small"), judge=mask_once, sampler=True, shrink=False,
            keep=(("rows", "length"), ("vocab_size", "mask_token_id"), "mlm_probability")),
    History(name="span_corruption", configs=span_configs(), judge=span_once, sampler=True, shrink=False,
            keep=(("noise_density", "mean_span_length"),)),
    History(name="make_nsp_pairs", configs=nsp_configs(), judge=nsp_once, sampler=True, shrink=False,
            max_examples=5, note=" (256 pairs)"),
)


# ---- differential checks ----------------------------------------------------------------------------

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


#: one differential check per record with ``compared`` (harness/spec/protocol.py says how, in words)
CASES: dict[str, Case] = {
    "distillation_loss": Case(distill_configs(), _distill_calls, _distill_judge),
    "build_inputs": Case(inputs_configs(), _inputs_calls, lambda *a: (_joined, None)),
    "build_model": Case(model_configs(), models.calls(lambda cfg: ()), models.judge("build_model"),
                        invoke=models.invoke),
    "bert_embeddings": Case(embedding_configs(), models.calls(lambda cfg: (
        cfg.vocab_size, cfg.hidden_size, cfg.max_positions)), models.judge("bert_embeddings"), invoke=models.invoke),
}

