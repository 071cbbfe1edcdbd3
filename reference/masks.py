"""Boolean visibility masks (True = the query may attend to the key).

Shapes: L query positions, S key positions; masks are (L, S).
"""
from __future__ import annotations

import torch


def causal_mask(L: int, S: int, alignment: str = "top_left", device=None) -> torch.Tensor:
    """Causal visibility for L queries over S keys.

    top_left (torch SDPA):        query i sees keys j <= i
    bottom_right (FlashAttention): query i sees keys j <= i + (S - L)
    """
    i = torch.arange(L, device=device)[:, None]
    j = torch.arange(S, device=device)[None, :]
    if alignment == "top_left":
        return j <= i
    if alignment == "bottom_right":
        return j <= i + (S - L)
    raise ValueError(f"unknown causal alignment {alignment!r}")


def window_mask(L: int, S: int, window: int, extent: str = "w", device=None) -> torch.Tensor:
    """Sliding-window visibility, queries aligned to the end of the keys.

    The query at row i has absolute position p = i + (S - L).
    extent "w"   (the protocol):              p - window <  j <= p   (window keys)
    extent "w+1" (FlashAttention, attn-gym):  p - window <= j <= p   (window + 1 keys)
    """
    if window < 1:
        raise ValueError(f"window must be >= 1, got {window}")
    p = torch.arange(L, device=device)[:, None] + (S - L)
    j = torch.arange(S, device=device)[None, :]
    reach = window if extent == "w" else window + 1 if extent == "w+1" else None
    if reach is None:
        raise ValueError(f"unknown window extent {extent!r}")
    return (j <= p) & (j > p - reach)


def chunk_mask(L: int, S: int, chunk: int, device=None) -> torch.Tensor:
    """Chunked local causal visibility (Llama 4's ``attention_chunk_size``), queries aligned to the end
    of the keys: the query at row i (absolute position p = i + S - L) sees exactly the keys j <= p of
    its own chunk, p // chunk == j // chunk. Not a sliding window: the first query of a chunk sees one
    key, the last one ``chunk`` keys."""
    if chunk < 1:
        raise ValueError(f"chunk must be >= 1, got {chunk}")
    p = torch.arange(L, device=device)[:, None] + (S - L)
    j = torch.arange(S, device=device)[None, :]
    return (j <= p) & (j // chunk == p // chunk)
