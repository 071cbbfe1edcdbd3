"""Planted bug: the GQA program-id mapping is off by one: query head h reads KV head (h + 1) // group.

Real pattern: ``off_hkv = (off_h + 1) // group`` (or a 1-based head index): the last query head
of each group reads the next group's keys and values.
Caught by: attention.gqa (the per-KV-head probe names the head each query head read).
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _mutant import export, mutant  # noqa: E402

export(mutant("flash_attention", "    hk = h // group  # the KV head of query head h\n",
              "    hk = tl.minimum((h + 1) // group, Hq // group - 1)  # BUG: off by one\n"),
       globals(), "scaled_dot_product_attention")
