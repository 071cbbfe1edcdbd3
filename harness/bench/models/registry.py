"""A registry of reference models and kernels the benchmarks run: name -> factory.

    from harness.bench.models.registry import register, create, names

    @register("my_model")
    def my_model(*, sdpa=None, sliding_window=None, **options):
        ...                      # build and return the model / kernel
    model = create("my_model", sdpa=target_sdpa, dim=256)

A factory takes the target's components by keyword -- ``sdpa`` (the target's
``scaled_dot_product_attention`` or None), ``sliding_window`` (its
``sliding_window_attention`` or None) -- plus its own options, and must accept
(and ignore) components it does not use (``**options``). ``register`` replaces an
existing entry of the same name, so users can override the built-ins.

Built-in entries:
  naive_attention   softmax(q k^T * scale) v in the input dtype, the n x n scores materialised:
                    (B, H, n, E) -> (B, H, n, E)
  banded_window     O(n * w) sliding-window kernel (``harness.bench.models.banded``)
  dense_window      the dense-mask O(n^2) sliding-window math in the input dtype
  lstm              nn.LSTM(d, d), the sequential O(n * d^2) contrast
  mistral_block     a stack of Mistral-style sliding-window decoder blocks
                    (``harness.bench.models.sliding_window_block``), on ``sliding_window`` when given
  hf_llama          transformers LlamaForCausalLM from a LlamaConfig, random weights
                    (no hub access); on ``sdpa`` via AttentionInterface when given
  hf_mistral        transformers MistralForCausalLM with ``sliding_window``, same
"""
from __future__ import annotations

import functools
from typing import Any, Callable

import torch

_REGISTRY: dict[str, Callable[..., Any]] = {}


def register(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator: ``@register("name")`` adds (or replaces) a factory."""
    def deco(factory: Callable[..., Any]) -> Callable[..., Any]:
        _REGISTRY[name] = factory
        return factory
    return deco


def create(name: str, **kwargs: Any) -> Any:
    """Build entry ``name`` with the target's components and options."""
    if name not in _REGISTRY:
        raise KeyError(f"no reference model {name!r}; registered: {', '.join(names())}")
    return _REGISTRY[name](**kwargs)


def names() -> list[str]:
    return sorted(_REGISTRY)


# --------------------------------------------------------------------------- kernels

@register("naive_attention")
def _naive_attention(**_: Any) -> Callable:
    """The textbook formula, materialising the (n x n) scores: softmax(q k^T * scale) v."""
    import math

    from harness.reference.masks import causal_mask

    def naive_attention(q, k, v, is_causal=False, scale=None):
        scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
        scores = torch.matmul(q, k.transpose(-2, -1))            # (B, H, L, S)
        scores.mul_(scale)
        if is_causal:
            scores.masked_fill_(~causal_mask(q.shape[-2], k.shape[-2], device=q.device), float("-inf"))
        return torch.matmul(torch.softmax(scores, dim=-1), v)     # (B, H, L, Ev)
    return naive_attention


@register("banded_window")
def _banded_window(*, window: int, extent: str = "w", block: int | None = None, **_: Any) -> Callable:
    from harness.bench.models.banded import banded_attention
    return functools.partial(banded_attention, window=window, extent=extent, block=block)


@register("dense_window")
def _dense_window(*, window: int, extent: str = "w", **_: Any) -> Callable:
    from harness.reference.sliding_window import sliding_window_math

    def dense_window(q, k, v, scale=None):
        return sliding_window_math(q, k, v, window, scale, extent, compute_dtype=q.dtype)
    return dense_window


@register("lstm")
def _lstm(*, dim: int, layers: int = 1, device="cpu", dtype=torch.float32, seed: int = 0,
          **_: Any) -> torch.nn.Module:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = torch.nn.LSTM(dim, dim, num_layers=layers, batch_first=True)
    return model.to(device=device, dtype=dtype).eval()


# --------------------------------------------------------------------------- models

@register("mistral_block")
def _mistral_block(*, depth: int, dim: int, heads: int, window: int, sliding_window=None,
                   kv_heads: int | None = None, seed: int = 0, dtype=torch.float64,
                   device="cpu", **_: Any) -> torch.nn.Module:
    from harness.bench.models.sliding_window_block import block_stack
    return block_stack(depth, dim, heads, window, attn=sliding_window, kv_heads=kv_heads,
                       seed=seed, dtype=dtype).to(device)


def _hf_attn(sdpa) -> str:
    if sdpa is None:
        return "sdpa"
    from harness.adapters.hf_attention_interface import register_target_attention
    return register_target_attention(sdpa)


def _hf_build(model_cls, config, seed: int, device, dtype):
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = model_cls(config)
    return model.to(device=device, dtype=dtype).eval()


HF_SMALL = dict(vocab_size=512, hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                num_attention_heads=8, max_position_embeddings=4096, tie_word_embeddings=False)


@register("hf_llama")
def _hf_llama(*, sdpa=None, num_key_value_heads: int | None = None, seed: int = 0,
              device="cpu", dtype=torch.float32, config: dict | None = None, **_: Any):
    """LlamaForCausalLM(LlamaConfig(**HF_SMALL, **config)) with random weights."""
    from transformers import LlamaConfig, LlamaForCausalLM
    options = {**HF_SMALL, **(config or {})}
    if num_key_value_heads is not None:
        options["num_key_value_heads"] = num_key_value_heads
    cfg = LlamaConfig(**options, attn_implementation=_hf_attn(sdpa))
    return _hf_build(LlamaForCausalLM, cfg, seed, device, dtype)


@register("hf_mistral")
def _hf_mistral(*, window: int, sdpa=None, num_key_value_heads: int | None = None, seed: int = 0,
                device="cpu", dtype=torch.float32, config: dict | None = None, **_: Any):
    """MistralForCausalLM with ``sliding_window=window`` (HF: keys j > i - window, w keys)."""
    from transformers import MistralConfig, MistralForCausalLM
    options = {**HF_SMALL, **(config or {}), "sliding_window": window}
    if num_key_value_heads is not None:
        options["num_key_value_heads"] = num_key_value_heads
    cfg = MistralConfig(**options, attn_implementation=_hf_attn(sdpa))
    return _hf_build(MistralForCausalLM, cfg, seed, device, dtype)
