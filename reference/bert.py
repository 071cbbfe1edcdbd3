"""BERT from its published configurations (Devlin et al. 2018), on transformers' ``BertModel``.

    BERT-base:  L=12, H=768,  A=12, FFN 3072  -> 109,482,240 parameters (108,891,648 without the pooler)
    BERT-large: L=24, H=1024, A=16, FFN 4096  -> 335,141,888 parameters (334,092,288 without the pooler)

both with WordPiece vocabulary 30522, 512 positions and 2 segments. The paper rounds these to
110 M and 340 M (-0.5 % and -1.4 %); the MLM and NSP heads are not counted (the MLM decoder is
tied to the word embeddings; the NSP classifier adds 2 H + 2). ``parameter_count`` is the
closed form the counts come from:

    embeddings  (V + P + S) H + 2 H             (token, position, segment tables; LayerNorm)
    per layer   4 (H^2 + H) + 2 H               (Q, K, V, output projections; LayerNorm)
              + 2 F H + F + H + 2 H             (FFN up and down; LayerNorm)
    pooler      H^2 + H

Input representation (the seeds: "input = token + position + segment embeddings"):
``bert_embeddings`` returns transformers' ``BertEmbeddings`` with its LayerNorm and dropout
replaced by identities, so its forward is the library's own sum W[ids] + P[positions] + T[segments].

``build_inputs`` packs one or two sentences as BERT does: ``[CLS] A [SEP]`` or
``[CLS] A [SEP] B [SEP]``, segment 0 up to and including the first [SEP], 1 after it.
``make_nsp_pairs`` draws next-sentence-prediction pairs: 50 % IsNext (label 0: B follows A in
its document), 50 % NotNext (label 1: B from another document), as transformers'
``next_sentence_label`` and BERT's create_pretraining_data.py.
"""
from __future__ import annotations

import torch
from torch import nn

#: bert-base-uncased's ids
CLS_ID, SEP_ID = 101, 102
IS_NEXT, NOT_NEXT = 0, 1

COMMON = dict(vocab_size=30522, max_position_embeddings=512, type_vocab_size=2)
CONFIGS = {
    "base": dict(COMMON, hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072),
    "large": dict(COMMON, hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096),
}
#: (with the pooler, without), from ``parameter_count``; the paper's rounded figures
PARAMETERS = {"base": (109_482_240, 108_891_648), "large": (335_141_888, 334_092_288)}
PUBLISHED = {"base": 110e6, "large": 340e6}


def parameter_count(vocab_size, max_position_embeddings, type_vocab_size, hidden_size, num_hidden_layers,
                    intermediate_size, pooler: bool = True, **_) -> int:
    H, F = hidden_size, intermediate_size
    embeddings = (vocab_size + max_position_embeddings + type_vocab_size) * H + 2 * H
    layer = 4 * (H * H + H) + 2 * H + (2 * F * H + F + H) + 2 * H
    return embeddings + num_hidden_layers * layer + (H * H + H if pooler else 0)


def bert_config(size: str = "base", **overrides):
    """transformers' BertConfig (imported here: importing transformers takes seconds, and
    ``import reference`` should not)."""
    from transformers import BertConfig

    return BertConfig(**{**CONFIGS[size], **overrides})


def build_bert(size: str = "base", add_pooling_layer: bool = True) -> nn.Module:
    """transformers' BertModel from the published configuration, random weights (no hub access)."""
    from transformers import BertModel

    return BertModel(bert_config(size), add_pooling_layer=add_pooling_layer)


class InputEmbedding(nn.Module):
    """BERT's input embedding without LayerNorm and dropout: the sum of three lookups,
    forward = W[ids] + P[positions] + T[segments] (Hugging Face's BertEmbeddings' tables and names;
    written in torch here so that building one imports no transformers: a worker's first call
    stays well inside the per-call limit on a busy machine).

    Shapes: input_ids (B, L) int64; token_type_ids (B, L) or None (segment 0 everywhere);
    position_ids (B, L), (L,) or None (0 .. L-1); out (B, L, hidden_size).
    """

    def __init__(self, vocab_size, hidden_size, max_position_embeddings=512, type_vocab_size=2):
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab_size, hidden_size, padding_idx=0)  # (BERT's [PAD] = 0)
        self.position_embeddings = nn.Embedding(max_position_embeddings, hidden_size)
        self.token_type_embeddings = nn.Embedding(type_vocab_size, hidden_size)

    def forward(self, input_ids, token_type_ids=None, position_ids=None):
        if position_ids is None:
            position_ids = torch.arange(input_ids.shape[-1], device=input_ids.device)  # (L,)
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        words = self.word_embeddings(input_ids)                      # (B, L, hidden)
        return words + self.token_type_embeddings(token_type_ids) + self.position_embeddings(position_ids)


def bert_embeddings(vocab_size, hidden_size, max_position_embeddings=512, type_vocab_size=2) -> nn.Module:
    return InputEmbedding(vocab_size, hidden_size, max_position_embeddings, type_vocab_size)


def build_inputs(tokens_a, tokens_b=None, *, cls_id=CLS_ID, sep_id=SEP_ID):
    """(input_ids, token_type_ids), 1-D int64: [CLS] A [SEP] (B [SEP]); segments 0 ... 0 (1 ... 1)."""
    ids = [cls_id, *tokens_a, sep_id]
    types = [0] * len(ids)
    if tokens_b is not None:
        ids += [*tokens_b, sep_id]
        types += [1] * (len(tokens_b) + 1)
    return torch.tensor(ids, dtype=torch.long), torch.tensor(types, dtype=torch.long)


def make_nsp_pairs(documents, num_pairs, *, generator=None):
    """[(sentence_a, sentence_b, label)] * num_pairs; ``documents`` is a list of documents, each a
    list of sentences (lists of ids); at least two documents, one with two or more sentences.
    A is a random sentence that has a successor; with probability 1/2 B is that successor
    (IsNext = 0), else a random sentence of a random other document (NotNext = 1)."""
    anchors = [(d, k) for d, doc in enumerate(documents) for k in range(len(doc) - 1)]
    pick = torch.randint(len(anchors), (num_pairs,), generator=generator).tolist()
    is_next = (torch.rand(num_pairs, generator=generator) < 0.5).tolist()
    other_doc = torch.randint(len(documents) - 1, (num_pairs,), generator=generator).tolist()
    other_sent = torch.rand(num_pairs, generator=generator).tolist()
    pairs = []
    for i in range(num_pairs):
        d, k = anchors[pick[i]]
        if is_next[i]:
            pairs.append((documents[d][k], documents[d][k + 1], IS_NEXT))
        else:
            e = other_doc[i] + (other_doc[i] >= d)  # uniform over the other documents
            doc = documents[e]
            pairs.append((documents[d][k], doc[int(other_sent[i] * len(doc))], NOT_NEXT))
    return pairs
