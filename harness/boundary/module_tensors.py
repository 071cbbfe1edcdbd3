"""Where the harness reaches a target module's tensors: one reading for every property, gradient,
consistency check and benchmark that writes, reads or differentiates them. The rules are the records'
(``tensors`` in ``harness/spec/protocol.py``); today:

    protocol name             role          where
    LayerNorm                 weight, bias  .weight, .bias (required names: torch.nn's)
    RMSNorm                   weight        .weight (required name: torch.nn's)
    T5RelativePositionBias    table         .relative_attention_bias.weight (required name: Hugging
                                            Face T5Attention's and x-transformers')
    LearnedPositionEmbedding  table         (max_positions, dim): .weight when it is a tensor of that
                                            shape, else the module's one parameter of that shape
                                            (an nn.Embedding kept as .table, .pe.emb, ...)

``locate`` gives the tensor's dotted attribute path (the same key ``named_parameters`` and
``torch.func.functional_call`` use), or an AssertionError that states the rule; ``get`` follows
a path; ``write`` locates and writes in place. These run next to the module (``runner.on_target``).
"""
from __future__ import annotations

from typing import Any

import torch

from harness.spec.protocol import TENSORS, TENSORS_NAMED_AS

#: (protocol name, role) -> the attribute path the protocol requires, or None: found by its shape
RULES: dict[tuple[str, str], str | None] = TENSORS


def get(mod: Any, path: str) -> Any:
    """``mod.a.b...`` for ``path`` "a.b..." (None where an attribute is absent)."""
    obj = mod
    for attr in path.split("."):
        obj = getattr(obj, attr, None)
    return obj


def locate(mod: Any, owner: str, role: str, shape: tuple[int, ...]) -> str:
    """The dotted path of ``owner``'s tensor ``role`` of ``shape`` in ``mod`` (see the module doc);
    AssertionError naming the rule when the module has none."""
    shape = tuple(int(s) for s in shape)
    required = RULES[(owner, role)]
    if required is not None:
        t = get(mod, required)
        if not isinstance(t, torch.Tensor):
            raise AssertionError(f"{owner} has no tensor .{required} (got {type(t).__name__}); the protocol "
                                 f"reads its {role} there, as {TENSORS_NAMED_AS[owner]} names it")
        if tuple(t.shape) != shape:
            raise AssertionError(f"{owner}'s .{required} has shape {tuple(t.shape)}, expected {shape}")
        return required
    t = get(mod, "weight")
    if isinstance(t, torch.Tensor) and tuple(t.shape) == shape:
        return "weight"
    named = getattr(mod, "named_parameters", None)
    found = [n for n, p in named() if tuple(p.shape) == shape] if callable(named) else []
    if len(found) != 1:
        raise AssertionError(f"{owner} has no .weight of shape {shape} and {len(found)} parameters of that shape "
                             f"({', '.join(found[:4]) or 'none'}); the protocol reads its {role} from .weight, "
                             f"or else from its one parameter of that shape")
    return found[0]


def write(mod: Any, owner: str, role: str, value: torch.Tensor) -> tuple[str, torch.dtype]:
    """Write ``value`` into ``owner``'s tensor ``role`` (located by ``value``'s shape) in place, in
    that tensor's dtype and device, as a checkpoint load or an optimizer step does; returns
    ``(its path, its dtype)``."""
    path = locate(mod, owner, role, tuple(value.shape))
    t = get(mod, path)
    with torch.no_grad():
        t.copy_(value.to(device=t.device, dtype=t.dtype))
    return path, t.dtype
