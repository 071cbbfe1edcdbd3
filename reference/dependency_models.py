"""Three tiny models with the three dependency profiles of the seeds, random weights, no hub access.

    model(inputs_embeds (B, L, D)) -> hidden states (B, L, H)

- ``bidirectional`` (BERT encoder): every output position depends on every input position;
  transformers' ``BertModel`` from a small ``BertConfig``.
- ``causal`` (GPT decoder): output i depends on inputs j <= i only; transformers' ``GPT2Model``.
- ``concat_unidirectional`` (ELMo): a forward LSTM LM and a backward LSTM LM side by side,
  output = [fwd_h ; bwd_h]: the first H/2 features depend on j <= i, the last H/2 on j >= i.
  Each feature sees one side only, so the token-level profile looks bidirectional while no
  feature is (the seeds: ELMo "is not truly bidirectional").

The protocol names ``build_model`` / ``MODEL_CLAIM`` of this module (and of ``reference``) are
the BERT-like encoder; ``BUILDERS`` maps each claim to its builder.
"""
from __future__ import annotations

import torch
from torch import nn

DIM, LAYERS, HEADS, MAX_LEN = 16, 2, 2, 32


class HiddenStates(nn.Module):
    """A transformers model called with ``inputs_embeds``, returning ``last_hidden_state``."""

    def __init__(self, model: nn.Module, embed_dim: int):
        super().__init__()
        self.model, self.embed_dim = model, embed_dim

    def forward(self, inputs_embeds):
        return self.model(inputs_embeds=inputs_embeds).last_hidden_state


class BiLM(nn.Module):
    """ELMo-like: forward and backward 2-layer LSTMs on the same embeddings, concatenated."""

    def __init__(self, embed_dim: int = DIM, hidden: int = 8):
        super().__init__()
        self.embed_dim = embed_dim
        self.forward_lm = nn.LSTM(embed_dim, hidden, num_layers=2, batch_first=True)
        self.backward_lm = nn.LSTM(embed_dim, hidden, num_layers=2, batch_first=True)

    def forward(self, inputs_embeds):
        fwd, _ = self.forward_lm(inputs_embeds)
        bwd, _ = self.backward_lm(inputs_embeds.flip(1))
        return torch.cat([fwd, bwd.flip(1)], dim=-1)


def build_bert_like(**overrides) -> nn.Module:
    from transformers import BertConfig, BertModel  # (here: importing transformers takes seconds)

    cfg = BertConfig(vocab_size=32, hidden_size=DIM, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                     intermediate_size=2 * DIM, max_position_embeddings=MAX_LEN, **overrides)
    return HiddenStates(BertModel(cfg, add_pooling_layer=False), DIM)


def build_gpt_like(**overrides) -> nn.Module:
    from transformers import GPT2Config, GPT2Model

    cfg = GPT2Config(vocab_size=32, n_embd=DIM, n_layer=LAYERS, n_head=HEADS, n_positions=MAX_LEN,
                     bos_token_id=0, eos_token_id=0, **overrides)
    return HiddenStates(GPT2Model(cfg), DIM)


def build_elmo_like() -> nn.Module:
    return BiLM()


BUILDERS = {"bidirectional": build_bert_like, "causal": build_gpt_like, "concat_unidirectional": build_elmo_like}

MODEL_CLAIM = "bidirectional"
build_model = build_bert_like
