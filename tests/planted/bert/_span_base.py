"""A correct T5 span corruption, split into hooks.

Every planted span-corruption bug in this folder subclasses ``SpanCorruption`` and overrides
ONE hook; unmodified it passes every ``span_corruption.*`` property. The math is T5's
``random_spans_noise_mask`` written with Python lists.
"""
from __future__ import annotations

import torch


class SpanCorruption:
    def rng(self, generator):
        return generator

    def counts(self, length, noise_density, mean_span_length):
        """(num_noise, num_spans) as T5 computes them."""
        num_noise = min(max(round(length * noise_density), 1), length - 1)
        num_spans = max(round(min(num_noise, length - num_noise) / mean_span_length), 1)
        return num_noise, num_spans

    def segment(self, items, segments, g):
        """``items`` split into ``segments`` positive lengths (distinct cut points)."""
        cuts = sorted(torch.randperm(items - 1, generator=g)[:segments - 1].add(1).tolist())
        bounds = [0, *cuts, items]
        return [b - a for a, b in zip(bounds, bounds[1:])]

    def spans(self, length, noise_density, mean_span_length, g):
        """[(start, end)] of the corrupted spans, in order."""
        num_noise, num_spans = self.counts(length, noise_density, mean_span_length)
        noise = self.segment(num_noise, num_spans, g)
        kept = self.segment(length - num_noise, num_spans, g)
        out, pos = [], 0
        for k, n in zip(kept, noise):
            pos += k
            out.append((pos, pos + n))
            pos += n
        return out

    def sentinel(self, i, sentinel_ids):
        return sentinel_ids[i]

    def target_span(self, tokens, start, end):
        return tokens[start:end]

    def span_corruption(self, tokens, *, sentinel_ids, noise_density=0.15, mean_span_length=3.0,
                        generator=None):
        toks = [int(x) for x in tokens]
        sentinel_ids = [int(x) for x in sentinel_ids]
        inputs, targets, pos = [], [], 0
        for i, (start, end) in enumerate(self.spans(len(toks), noise_density, mean_span_length,
                                                    self.rng(generator))):
            sid = self.sentinel(i, sentinel_ids)
            inputs += toks[pos:start] + [sid]
            targets += [sid] + self.target_span(toks, start, end)
            pos = end
        inputs += toks[pos:]
        return torch.tensor(inputs, dtype=torch.long), torch.tensor(targets, dtype=torch.long)


span_corruption = SpanCorruption().span_corruption
