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


def random_segmentation(num_items: int, num_segments: int, generator=None) -> list[int]:
    """num_items split into num_segments positive lengths, uniformly over such splits."""
    cuts = sorted((torch.randperm(num_items - 1, generator=generator)[:num_segments - 1] + 1).tolist())
    bounds = [0, *cuts, num_items]
    return [b - a for a, b in zip(bounds, bounds[1:])]


def noise_spans(length: int, noise_density: float, mean_span_length: float, generator=None) -> list[tuple[int, int]]:
    """The corrupted spans [start, end), in order: kept, noise, kept, noise, ..."""
    num_noise = min(max(int(round(length * noise_density)), 1), length - 1)
    num_kept = length - num_noise
    num_spans = max(int(round(min(num_noise, num_kept) / mean_span_length)), 1)
    noise_lengths = random_segmentation(num_noise, num_spans, generator)
    kept_lengths = random_segmentation(num_kept, num_spans, generator)
    spans, pos = [], 0
    for kept, noise in zip(kept_lengths, noise_lengths):
        pos += kept
        spans.append((pos, pos + noise))
        pos += noise
    return spans


def span_corruption(tokens, *, sentinel_ids, noise_density=0.15, mean_span_length=3.0, generator=None):
    """(inputs, targets): each span replaced in ``inputs`` by the next sentinel; ``targets`` is each
    sentinel followed by its span (plain lists: a call is a few list operations, not tensor ops)."""
    seq = torch.as_tensor(tokens, dtype=torch.long).cpu().tolist()
    spans = noise_spans(len(seq), noise_density, mean_span_length, generator)
    sentinels = list(sentinel_ids)
    if len(spans) > len(sentinels):
        raise ValueError(f"{len(spans)} spans but only {len(sentinels)} sentinel ids")
    inputs, targets, pos = [], [], 0
    for sentinel, (start, end) in zip(sentinels, spans):
        inputs += seq[pos:start] + [sentinel]
        targets += [sentinel] + seq[start:end]
        pos = end
    inputs += seq[pos:]
    return torch.tensor(inputs, dtype=torch.long), torch.tensor(targets, dtype=torch.long)
