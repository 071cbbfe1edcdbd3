"""PyTorch's paged attention (``torch.nn.attention.experimental._paged_attention.PagedAttention``,
attention-gym's paged example moved into torch) on ``flex_attention``, as ``attention_with_kvcache``.

What is torch's: the page table and its inverse (``PagedAttention.page_table`` /
``physical_to_logical``), the cache update through the page table (``PagedAttention.assign``: the
physical address of each new position), the conversion of a logical block mask to the physical
pool (``convert_logical_block_mask``, whose mask_mod maps each physical key back to its logical
position and bounds it by the item's length) and of a score_mod (``get_score_mod``), and the
attention itself (``flex_attention``, eager on a CPU: its math path). What the adapter does: the
protocol's layout to torch's and back (the pool ``(num_blocks, Hkv, block_size, D)`` is torch's
``(1, Hkv, num_blocks * block_size, D)`` with the pages one after the other), the logical mask
(positions below cache_seqlens[b] + Lnew; causal bottom-right; a window of w keys), ``softcap`` as
a score_mod, and ``sinks`` from flex_attention's log-sum-exp: out * sigmoid(lse - sink), the
softmax's denominator with exp(sink) added.

torch's ``PagedAttention`` sizes its page table (max_batch, n_pages) and converts every logical
block index of the mask through it, so the logical mask must not be wider than the pool: the
adapter builds it over the pages in use, not over max_blocks * block_size (a pool smaller than one
item's logical capacity, paging's point, otherwise fails with an index error inside torch).

A linear cache ``(B, Hkv, Smax, D)`` is the pool of B pages of Smax slots, item b on page b. Not
taken (declared): rotary tables, and a rolling window (positions past the cache's slots).
"""
from __future__ import annotations

import warnings

import torch
from torch.nn.attention.experimental._paged_attention import PagedAttention
from torch.nn.attention.flex_attention import AuxRequest, create_block_mask, flex_attention

from harness.adapters.flex_options import sink_weight, softcap_mod

# eager flex_attention on a CPU is its unfused math path, on purpose here (the adapter checks torch's
# paging, not a compiled kernel); its advice to compile is said once in this docstring instead
warnings.filterwarnings("ignore", message="flex_attention called without torch.compile")

HARNESS_UNSUPPORTED = {"kvcache_rotary", "kvcache_window"}

#: query rows per block of the logical block mask (any size: eager flex_attention is dense math)
Q_BLOCK = 128


def _paged_attention(table, lengths, num_blocks: int, block_size: int, device) -> PagedAttention:
    """torch's page table for ``table`` (B, max_blocks): only the pages holding positions below
    ``lengths`` are mapped (the others may be anything, as in the protocol)."""
    B = table.shape[0]
    pa = PagedAttention(n_pages=num_blocks, page_size=block_size, max_batch_size=B, device=device)
    for b in range(B):
        used = -(-int(lengths[b]) // block_size)
        pages = table[b, :used].to(device=device, dtype=torch.int64)
        pa.page_table[b, :used] = pages
        pa.physical_to_logical[b, pages] = torch.arange(used, device=device)
        pa.capacity[b] = used * block_size
    return pa


def attention_with_kvcache(q, k_cache, v_cache, k=None, v=None, cache_seqlens=None, window=None, causal=True,
                           scale=None, rotary_cos=None, rotary_sin=None, rotary_interleaved=False,
                           block_table=None, softcap=None, sinks=None):
    if rotary_cos is not None:
        raise NotImplementedError("rotary tables are not taken (flex_attention has no RoPE)")
    B, Hq, Lq, _ = q.shape
    dev = q.device
    if block_table is None:  # a linear cache: B pages of Smax slots, item b on page b
        block_table = torch.arange(B, dtype=torch.int32, device=dev)[:, None]
    num_blocks, Hkv, block_size, E = k_cache.shape
    Ev = v_cache.shape[-1]
    lens = torch.as_tensor(cache_seqlens, device=dev).to(torch.int64).reshape(-1).expand(B)
    Lnew = 0 if k is None else k.shape[-2]
    n = lens + Lnew
    if int(n.max()) > block_table.shape[-1] * block_size:
        raise NotImplementedError("positions past the cache's slots (a rolling cache) are not taken")
    pa = _paged_attention(block_table, n, num_blocks, block_size, dev)
    # torch's layout: (1, Hkv, num_blocks * block_size, D), the pages one after the other
    flat_k = k_cache.permute(1, 0, 2, 3).reshape(1, Hkv, num_blocks * block_size, E).clone()
    flat_v = v_cache.permute(1, 0, 2, 3).reshape(1, Hkv, num_blocks * block_size, Ev).clone()
    if k is not None:
        pos = lens[:, None] + torch.arange(Lnew, device=dev)[None]
        pa.assign(torch.arange(B, device=dev), pos, k.detach(), v.detach(), flat_k, flat_v)
        with torch.no_grad():
            k_cache.copy_(flat_k[0].reshape(Hkv, num_blocks, block_size, E).permute(1, 0, 2, 3))
            v_cache.copy_(flat_v[0].reshape(Hkv, num_blocks, block_size, Ev).permute(1, 0, 2, 3))

    def logical_mask(b, h, q_idx, kv_idx):
        q_pos = n[b] - Lq + q_idx
        keep = kv_idx < n[b]
        if causal:
            keep = keep & (kv_idx <= q_pos)
        if window is not None:
            keep = keep & (kv_idx > q_pos - window)
        return keep

    # torch's page table has n_pages columns and convert_logical_block_mask gathers it with every
    # logical block index of the mask (padding included): a logical mask wider than the pool fails
    # ("index out of bounds"), so it spans only the pages in use (each item's are distinct pool pages)
    used = -(-int(n.max()) // block_size)
    logical = create_block_mask(logical_mask, B, None, Lq, used * block_size, device=dev,
                                BLOCK_SIZE=(Q_BLOCK, block_size))
    physical = pa.convert_logical_block_mask(logical, kv_len=n)
    capped = softcap_mod(softcap)
    score_mod = None if capped is None else pa.get_score_mod(capped, kv_len=n)
    out, aux = flex_attention(q, flat_k.expand(B, -1, -1, -1), flat_v.expand(B, -1, -1, -1), score_mod=score_mod,
                              block_mask=physical, scale=scale, enable_gqa=Hq != Hkv,
                              return_aux=AuxRequest(lse=True))
    if sinks is not None:  # the denominator with exp(sink) added: out * Z / (Z + exp(sink))
        weight = sink_weight(aux.lse, sinks, q.dtype)                           # (B, Hq, Lq)
        out = (out.to(weight.dtype) * weight[..., None]).to(q.dtype)
    return out


def _warm() -> None:
    """One tiny call (softcap and sinks too) at import: eager flex_attention's first call imports
    torch's compiler stack, 9.4 s at load 10 on a 2-core machine, which would otherwise count
    against the first property call's per-call limit (20 s): past it the function is marked hung
    and every later call of the session fails. Imports run under --import-timeout instead."""
    x = torch.zeros(1, 1, 1, 4)
    attention_with_kvcache(x, torch.zeros(1, 1, 2, 4), torch.zeros(1, 1, 2, 4), x, x, 0, softcap=1.0,
                           sinks=torch.zeros(1))


_warm()
