"""Planted bug: NotNext sentences are drawn from the whole corpus, A's own successor included.

Real pattern: "random sentence" sampled without excluding A's document (BERT's
create_pretraining_data.py retries until the random document differs), so some NotNext
pairs are in fact consecutive: wrong labels. Caught by: models.nsp.
Message: labelled NotNext (1), but B
"""
import torch

from harness.reference.bert import IS_NEXT, NOT_NEXT


def make_nsp_pairs(documents, num_pairs, *, generator=None):
    anchors = [(d, k) for d, doc in enumerate(documents) for k in range(len(doc) - 1)]
    sentences = [s for doc in documents for s in doc]
    pick = torch.randint(len(anchors), (num_pairs,), generator=generator).tolist()
    coin = (torch.rand(num_pairs, generator=generator) < 0.5).tolist()
    other = torch.randint(len(sentences), (num_pairs,), generator=generator).tolist()
    pairs = []
    for i in range(num_pairs):
        d, k = anchors[pick[i]]
        if coin[i]:
            pairs.append((documents[d][k], documents[d][k + 1], IS_NEXT))
        else:
            pairs.append((documents[d][k], sentences[other[i]], NOT_NEXT))  # BUG: may be A's successor
    return pairs
