"""A correct T5 relative position bias, written as a library would, split into hooks.

Every planted-bug target in this folder subclasses ``T5Bias``, overrides ONE hook with a
real-world mistake and exports ``t5_relative_position_bias``. The buckets are Hugging Face's
(``tests/planted/positions/_base.py``). Unmodified, it passes every t5_bias property
(tests/test_planted_t5_bias.py checks it).
"""
from __future__ import annotations

import importlib.util
import pathlib

import torch

_spec = importlib.util.spec_from_file_location(  # (a second module named _base: loaded by path)
    "_positions_base", pathlib.Path(__file__).resolve().parents[1] / "positions" / "_base.py")
_positions = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_positions)
T5Buckets = _positions.T5Buckets


class T5Bias:
    buckets = T5Buckets()

    def query_positions(self, query_len, key_len):
        return torch.arange(key_len - query_len, key_len)  # aligned to the end of the keys

    def relative(self, q_pos, k_pos):
        return k_pos[None, :] - q_pos[:, None]  # key - query, (Lq, Lk)

    def lookup(self, table, buckets):
        return table[buckets].permute(2, 0, 1)  # (Lq, Lk, H) -> (H, Lq, Lk)

    def t5_relative_position_bias(self, table, query_len, key_len, bidirectional=True, num_buckets=32,
                                  max_distance=128):
        rel = self.relative(self.query_positions(query_len, key_len).to(table.device),
                            torch.arange(key_len, device=table.device))
        b = self.buckets.t5_relative_position_bucket(rel, bidirectional, num_buckets, max_distance)
        return self.lookup(table, b)


t5_relative_position_bias = T5Bias().t5_relative_position_bias
