"""T5 span corruption (Raffel et al. 2020, ``random_spans_noise_mask``).

    tokens (L,) int64,  sentinel_ids: a sequence of ids, used in order
    -> inputs (L - noise + spans,), targets (noise + spans,)

    tokens   My teddy bear is cute and reading
    inputs   My teddy bear <S0> and reading
    targets  <S0> is cute

As in T5: num_noise = round(L * noise_density), clamped to [1, L - 1];
num_spans = round(min(num_noise, L - num_noise) / mean_span_length), at least 1;
the noise tokens and the kept tokens are each split into num_spans non-empty
segments uniformly at random, interleaved kept, noise, kept, noise, ... So the
corrupted spans are non-empty and separated by at least one kept token. Each
span is replaced in ``inputs`` by the next sentinel; ``targets`` is each
sentinel followed by its span. (The T5 paper's example also ends the targets
with one more sentinel when the text ends with kept tokens; the protocol allows
that trailing sentinel. With T5's interleaving the text always ends in noise.)
"""
from __future__ import annotations

import torch


def random_segmentation(num_items: int, num_segments: int, generator=None) -> torch.Tensor:
    """num_items split into num_segments positive lengths, uniformly over such splits."""
    cuts = torch.randperm(num_items - 1, generator=generator)[:num_segments - 1].sort().values + 1
    bounds = torch.cat([torch.zeros(1, dtype=torch.long), cuts, torch.tensor([num_items])])
    return bounds.diff()


def noise_mask(length: int, noise_density: float, mean_span_length: float, generator=None) -> torch.Tensor:
    """(L,) bool, True = corrupted."""
    num_noise = min(max(int(round(length * noise_density)), 1), length - 1)
    num_kept = length - num_noise
    num_spans = max(int(round(min(num_noise, num_kept) / mean_span_length)), 1)
    noise_lengths = random_segmentation(num_noise, num_spans, generator)
    kept_lengths = random_segmentation(num_kept, num_spans, generator)
    lengths = torch.stack([kept_lengths, noise_lengths], dim=1).flatten()  # kept, noise, kept, ...
    bounds = lengths.cumsum(0)
    starts, ends = bounds[0::2], bounds[1::2]  # each noise span is [start, end)
    edges = torch.zeros(length + 1, dtype=torch.long)
    edges.index_add_(0, starts, torch.ones_like(starts))
    edges.index_add_(0, ends, -torch.ones_like(ends))
    return edges.cumsum(0)[:length] > 0


def apply_sentinels(tokens: torch.Tensor, mask: torch.Tensor, sentinel_ids) -> tuple[torch.Tensor, torch.Tensor]:
    """Replace each maximal run of ``mask`` by the next sentinel; targets = sentinel + run, in order."""
    sentinels = torch.as_tensor(list(sentinel_ids), dtype=torch.long)
    prev = torch.cat([torch.zeros(1, dtype=torch.bool), mask[:-1]])
    start = mask & ~prev  # first token of each span
    span_index = start.long().cumsum(0) - 1  # which span each token is in
    if int(start.sum()) > len(sentinels):
        raise ValueError(f"{int(start.sum())} spans but only {len(sentinels)} sentinel ids")
    sentinel_at = sentinels[span_index.clamp_min(0)]
    inputs = torch.where(start, sentinel_at, tokens)[~mask | start]
    # targets: each span start contributes (sentinel, token), other noise tokens (token)
    pairs = torch.stack([sentinel_at, tokens], dim=1)[mask]  # (noise, 2)
    keep = torch.stack([start, torch.ones_like(start)], dim=1)[mask]
    targets = pairs[keep]
    return inputs, targets


def span_corruption(tokens, *, sentinel_ids, noise_density=0.15, mean_span_length=3.0, generator=None):
    tokens = torch.as_tensor(tokens, dtype=torch.long)
    mask = noise_mask(tokens.shape[-1], noise_density, mean_span_length, generator)
    return apply_sentinels(tokens.cpu(), mask, sentinel_ids)
