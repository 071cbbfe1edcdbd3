"""Not a bug: the bottom-right causal alignment of causal_bottom_right.py, declared
as the named convention. attention.causal must PASS and record convention:bottom_right.
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from causal_bottom_right import Planted  # noqa: E402

HARNESS_CONVENTIONS = {"causal_alignment": "bottom_right"}


scaled_dot_product_attention = Planted().scaled_dot_product_attention
