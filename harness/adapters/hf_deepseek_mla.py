"""Hugging Face transformers' DeepSeek-V3 attention (``DeepseekV3Attention``, eager) as ``mla_decode``.

    --impl harness.adapters.hf_deepseek_mla

The module as a model calls it (``forward(hidden_states, position_embeddings, attention_mask)``, the
eager attention interface), its weights chosen so that its unabsorbed computation is the decode form's
absorbed one: ``qk_nope_head_dim = kv_lora_rank = v_head_dim`` with ``kv_b_proj`` giving each head the latent
itself as its key part (W_UK = I) and as its values (W_UV = I; the module's latent is the cache's first
head_dim_v dims, or one more for an even RoPE part, the rest its RoPE part: the decode form's scores
run over all D dims either way),
``q_proj`` and ``kv_a_proj_with_mqa`` reading the query and the cached latent out of the hidden
states, ``o_proj`` writing the heads' outputs back. Every filled position is one token of a prefill
(no cache object: the same call in every release), its query zero except for the last Lq; the causal
mask is the model's additive one for those positions. What is replaced: ``kv_a_layernorm`` by the
identity, since the protocol's cache holds the latent after that norm (as FlashMLA's and vLLM's caches
do), and the rotary embedding by cos = 1, sin = 0, since the protocol's q_pe and k_pe are already
rotated. The scale is the module's own ``scaling``, (qk_nope_head_dim + qk_rope_head_dim)^-0.5 = D^-0.5,
unless the call passes one.

One latent head (DeepSeek's) and a linear cache: ``mla_kv_heads`` and ``mla_paged`` are unsupported
(the function takes no block table).
"""
from __future__ import annotations

import torch
import transformers
from transformers.models.deepseek_v3.configuration_deepseek_v3 import DeepseekV3Config
from transformers.models.deepseek_v3.modeling_deepseek_v3 import DeepseekV3Attention

__version__ = transformers.__version__

HARNESS_UNSUPPORTED = ["mla_kv_heads"]
#: the eager softmax runs in float32 whatever the input dtype (as Llama's: ``hf_attention``): a float64
#: input loses precision there, so float64 is not claimed
HARNESS_DTYPES = ("float32", "float16", "bfloat16")

_MODULES: dict[tuple, DeepseekV3Attention] = {}


def _module(hq: int, dc: int, dr: int, dv: int, dtype: torch.dtype, device) -> DeepseekV3Attention:
    key = (hq, dc, dr, dv, dtype, str(device))
    if key in _MODULES:
        return _MODULES[key]
    D = dc + dr
    hidden = hq * D + D  # [the Hq queries | the cached latent and k_pe]
    config = DeepseekV3Config(hidden_size=hidden, num_attention_heads=hq, num_key_value_heads=hq,
                              q_lora_rank=None, kv_lora_rank=dc, qk_nope_head_dim=dc, qk_rope_head_dim=dr,
                              v_head_dim=dv, attention_bias=False, num_hidden_layers=1, vocab_size=8)
    config._attn_implementation = "eager"
    module = DeepseekV3Attention(config, layer_idx=0).eval()
    with torch.no_grad():
        module.q_proj.weight.zero_()
        module.q_proj.weight[:, :hq * D] = torch.eye(hq * D)
        module.kv_a_proj_with_mqa.weight.zero_()
        module.kv_a_proj_with_mqa.weight[:, hq * D:] = torch.eye(D)
        up = torch.zeros(hq, dc + dv, dc)
        up[:, :dc] = torch.eye(dc)  # W_UK = I: the key's latent part is the latent
        up[:, dc:] = torch.eye(dc)[:dv]  # W_UV: the values are the latent's first dv dims
        module.kv_b_proj.weight.copy_(up.reshape(hq * (dc + dv), dc))
        module.o_proj.weight.zero_()
        module.o_proj.weight[:hq * dv] = torch.eye(hq * dv)
    module.kv_a_layernorm = torch.nn.Identity()  # the cache holds the normalised latent
    module = module.to(device=device, dtype=dtype)
    _MODULES[key] = module
    return module


def mla_decode(q, kv_cache, cache_seqlens, head_dim_v, scale=None, causal=True):
    B, Lq, Hq, D = q.shape
    if kv_cache.shape[2] != 1:
        raise ValueError(f"DeepSeek-V3's attention has one latent head; the cache has {kv_cache.shape[2]}")
    dv = int(head_dim_v)
    # The decode form's scores run over all D dims and its values are the first dv: where the latent
    # ends and the RoPE part starts changes nothing. The module's latent is taken as those dv dims (one
    # more where the rest is odd: transformers' config wants an even rotary dimension).
    dc = dv + (D - dv) % 2
    module = _module(Hq, dc, D - dc, dv, q.dtype, q.device)
    default = module.scaling
    module.scaling = default if scale is None else float(scale)
    outs = []
    try:
        for b in range(B):
            n = int(cache_seqlens[b])
            queries = torch.zeros(n, Hq, D, dtype=q.dtype, device=q.device)
            queries[n - Lq:] = q[b]
            hidden = torch.cat([queries.reshape(n, Hq * D), kv_cache[b, :n, 0]], dim=-1)[None]
            ones = torch.ones(1, n, D - dc, dtype=q.dtype, device=q.device)
            mask = None
            if causal:
                mask = torch.full((n, n), torch.finfo(q.dtype).min, dtype=q.dtype, device=q.device).triu(1)[None, None]
            with torch.no_grad():
                out, _ = module(hidden, (ones, torch.zeros_like(ones)), mask)
            outs.append(out[0, n - Lq:, :Hq * dv].reshape(Lq, Hq, dv))
    finally:
        module.scaling = default
    return torch.stack(outs)
