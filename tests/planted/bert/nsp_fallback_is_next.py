"""Planted bug: NotNext falls back to IsNext when the random document is A's own.

Real pattern: "if the random document is the current one, just use the next sentence"
instead of drawing again: the labels are right but NotNext is under-drawn (45 % with
10 documents, 25 % with 2). Caught by: models.nsp.
Message: IsNext, expected 50 %
"""
import torch

from harness.reference.bert import IS_NEXT, NOT_NEXT


def make_nsp_pairs(documents, num_pairs, *, generator=None):
    anchors = [(d, k) for d, doc in enumerate(documents) for k in range(len(doc) - 1)]
    pick = torch.randint(len(anchors), (num_pairs,), generator=generator).tolist()
    coin = (torch.rand(num_pairs, generator=generator) < 0.5).tolist()
    other_doc = torch.randint(len(documents), (num_pairs,), generator=generator).tolist()
    pairs = []
    for i in range(num_pairs):
        d, k = anchors[pick[i]]
        if coin[i] or other_doc[i] == d:  # BUG: falls back to the true next sentence
            pairs.append((documents[d][k], documents[d][k + 1], IS_NEXT))
        else:
            pairs.append((documents[d][k], documents[other_doc[i]][0], NOT_NEXT))
    return pairs
