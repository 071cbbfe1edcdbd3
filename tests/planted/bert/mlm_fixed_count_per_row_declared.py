"""Control (not a bug): the fixed-count-per-row selection of ``mlm_fixed_count_per_row.py``
with the convention declared; passes mlm.independence (convention:fixed_count) and
mlm.selection_rate (with the rounding slack)."""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from mlm_fixed_count_per_row import mask_tokens  # noqa: E402,F401

HARNESS_CONVENTIONS = {"mlm_selection": "fixed_count"}
