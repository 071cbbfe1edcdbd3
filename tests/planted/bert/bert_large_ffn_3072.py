"""Planted bug: BERT-large built with BERT-base's feed-forward size (3072 instead of 4096).

Real pattern: a hand-written config dict for the large model that copies
``intermediate_size=3072`` from base (the default of ``BertConfig``); the model still runs,
with 50 M fewer parameters (285 M). Caught by: models.param_count.
Message: BERT-large
"""
from transformers import BertModel

from harness.reference.bert import bert_config


def build_bert(size="base", add_pooling_layer=True):
    cfg = bert_config(size, intermediate_size=3072)  # BUG: right for base only
    return BertModel(cfg, add_pooling_layer=add_pooling_layer)
