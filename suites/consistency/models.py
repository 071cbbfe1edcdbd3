"""The differential checks of the model names (``build_model``, ``bert_embeddings``) for
``suites/bert/specs.py``: two backends of one model are compared with the same weights.

Each target builds its module (seeded alike); the first target's state dict (parameters and
buffers), with its weights redrawn at unit scale (``exercised``), is loaded into every module, the
first's too, strictly: other keys or shapes mean another model, not another backend of it, and the
check is skipped with that reason. (At BERT's init scale, std 0.02, every activation stays near
zero, where backend differences vanish: exact and tanh GELU differ by 2e-7 there.) Then every module runs one seeded
input in eval mode (no dropout). Yardstick (the tolerance policy, as attention-gym does it): the
first target's module run in float64 on a copy is the truth, its own float32 run the naive
same-precision error; two outputs may differ by twice the allowance. What the first target's run
recorded travels with the example, as the one call's argument (``Comparison``): no state outlives it.

    build_model:     inputs_embeds (B, L, D), D = the first model's embed_dim -> (B, L, H)
    bert_embeddings: input_ids, token_type_ids (B, L) -> (B, L, hidden_size)
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from harness.spec import tolerance
from harness.suites.kit import ImplementationError, is_module, manual_seed, on_target
from harness.boundary.target_ops import eval_forward, load_state, seeded, state_of


class NotComparable(Exception):
    """The targets' modules are not one model (their state dicts differ)."""


@dataclass
class FirstRun:
    """The first target's run of a comparison: its exercised weights, the input, the float64 truth
    and its own float32 output (the naive yardstick, and that target's compared output)."""

    owner: Any
    state: dict
    x: tuple
    truth: torch.Tensor
    naive: Any


@dataclass
class Comparison:
    """One example's comparison of a model name across the targets: the arguments its module is
    built with, and the first target's run once one target has made it (``invoke``)."""

    build_args: tuple
    first: FirstRun | None = None


def _build(target, name: str, cfg, args: tuple):
    mod = on_target(target, seeded, cfg.seed % 2**31, target.lookup(name), *args)
    if not is_module(mod):
        raise ImplementationError(f"{name}(...) returned {type(mod).__name__}, expected an nn.Module")
    return mod


def _inputs(name: str, cfg, first) -> tuple:
    with torch.random.fork_rng(devices=[]):
        manual_seed(cfg.seed % 2**31)
        if name == "build_model":
            return (torch.randn(cfg.batch, cfg.length, first, dtype=torch.float32),)
        ids = torch.randint(0, cfg.vocab_size, (cfg.batch, cfg.length))
        return ids, torch.randint(0, 2, (cfg.batch, cfg.length))


def exercised(state: dict[str, torch.Tensor], seed: int) -> dict[str, torch.Tensor]:
    """``state`` with every floating matrix redrawn N(0, 1 / fan_in) (activations of order 1) and
    every floating vector (biases, norm weights) moved by N(0, 0.1^2); integer buffers kept."""
    g = torch.Generator().manual_seed(seed)
    out = {}
    for k, v in state.items():
        if not v.is_floating_point():
            out[k] = v
        elif v.dim() >= 2:
            out[k] = (torch.randn(v.shape, generator=g, dtype=torch.float64) / v.shape[-1] ** 0.5).to(v.dtype)
        else:
            out[k] = (v.double().cpu() + 0.1 * torch.randn(v.shape, generator=g, dtype=torch.float64)).to(v.dtype)
    return out


def invoke(target, name: str, cfg, args, kwargs):
    """Build ``name`` on ``target`` (``args``: the example's ``Comparison``); the first target's
    weights (and input, and yardstick) are recorded in it, every later one loads them; then the
    float32 eval-mode forward."""
    (comparison,) = args
    mod = _build(target, name, cfg, comparison.build_args)
    if comparison.first is None:
        width = on_target(target, getattr, mod, "embed_dim") if name == "build_model" else None
        if name == "build_model" and not isinstance(width, int):
            raise ImplementationError("build_model()'s module has no integer attribute embed_dim")
        state = exercised(on_target(target, state_of, mod), cfg.seed % 2**31)
        on_target(target, load_state, mod, state)
        x = _inputs(name, cfg, width)
        truth = on_target(target, eval_forward, mod, "float64", *x)
        comparison.first = FirstRun(owner=target, state=state, x=x, truth=truth,
                                    naive=on_target(target, eval_forward, mod, None, *x))
        return _checked(name, comparison.first.naive)  # the first target's float32 run is its output
    first = comparison.first
    why = on_target(target, load_state, mod, first.state)
    if why:
        raise NotComparable(f"{target.spec} is another model than {first.owner.spec}: {why}")
    return _checked(name, on_target(target, eval_forward, mod, None, *first.x))


def _checked(name: str, out):
    if not isinstance(out, torch.Tensor):
        raise ImplementationError(f"{name}'s module returned {type(out).__name__}, expected a Tensor")
    return out


def calls(build_args):
    """One call per example, whose one argument is the example's fresh ``Comparison``."""
    def make(cfg, device):
        return [("same weights, eval mode", (Comparison(build_args(cfg)),), {})]
    return make


def judge(name: str):
    def yardstick(cfg, label, args, kwargs, out_dtype):
        (comparison,) = args
        truth, naive = comparison.first.truth, comparison.first.naive
        return (lambda out: out.detach().cpu().to(torch.float64)), \
            2 * tolerance.allowance(truth, naive.detach().cpu(), dtype=naive.dtype)
    return yardstick
