"""Planted bug: the segment (token type) embedding is never added.

Real pattern: an embedding layer ported from a RoBERTa/GPT-style model (no segments) under
a BERT checkpoint: ``token_type_ids`` are accepted and ignored, so sentence A and B look alike
(NSP and pair tasks lose their signal). Caught by: models.embedding_sum.
Message: segment ids change nothing
"""
from harness.reference.bert import InputEmbedding


class Planted(InputEmbedding):
    def forward(self, input_ids, token_type_ids=None, position_ids=None):
        # BUG: token_type_ids dropped; segment 0 everywhere
        return super().forward(input_ids, None, position_ids)


def bert_embeddings(vocab_size, hidden_size, max_position_embeddings=512, type_vocab_size=2):
    return Planted(vocab_size, hidden_size, max_position_embeddings, type_vocab_size)
