"""docs/found.md cannot go stale: every row's repro line, replayed on the pinned buggy release,
fails and names the row's property; where a later release fixed it, the same configuration passes
on that release; and each buggy release is a known-buggy module in ``harness.controls``, never a
control (so the false-alarm sweep stays at zero). Releases held side by side skip with their
install command where absent (failed instead under ``$HARNESS_REQUIRE_RELEASES``, as in CI); the
liger row needs liger-kernel and triton, the ONNX row onnx (``optional_libs``)."""
from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from harness import controls
from planted_support import release_target

PAGE = Path(__file__).resolve().parents[1] / "docs" / "found.md"

#: buggy/fixed adapter -> (folder, package, version) of its side-by-side release
RELEASES = {f"harness.adapters.{m}": r for m, r in {
    "rotary_embedding_torch_0_2_6": ("ret-0.2.6", "rotary-embedding-torch", "0.2.6"),
    "rotary_embedding_torch_0_2_7": ("ret-0.2.7", "rotary-embedding-torch", "0.2.7"),
    "rotary_embedding_torch_0_8_2": ("ret-0.8.2", "rotary-embedding-torch", "0.8.2"),
    "rotary_embedding_torch_0_8_3": ("ret-0.8.3", "rotary-embedding-torch", "0.8.3"),
    "xtransformers_1_0_1_t5_bias": ("xt-1.0.1", "x-transformers", "1.0.1"),
    "xtransformers_1_0_2_t5_bias": ("xt-1.0.2", "x-transformers", "1.0.2"),
    "xtransformers_1_22_16_alibi": ("xt-1.22.16", "x-transformers", "1.22.16"),
    "xtransformers_1_22_17_alibi": ("xt-1.22.17", "x-transformers", "1.22.17"),
    "hf_rope_4_38_2": ("tf-4.38.2", "transformers", "4.38.2"),
}.items()}


def rows() -> list[dict]:
    """The table's rows: number, property, repro argv (after ``python -m harness``), the buggy
    target, and the fixed release's target (or None)."""
    out = []
    for line in PAGE.read_text().splitlines():
        if not re.match(r"\| \d+ \|", line):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        repro = re.search(r"`python -m harness (repro [^`]+)`", cells[5]).group(1)
        argv = shlex.split(repro)
        fixed = re.search(r"`(harness\.adapters\.\w+)`", cells[6])
        out.append({"n": cells[0], "property": cells[3].strip("`"), "argv": argv,
                    "buggy": argv[argv.index("--impl") + 1], "fixed": fixed.group(1) if fixed else None})
    return out


ROWS = rows()
MARKS = {"harness.adapters.liger_positions": pytest.mark.optional_libs("liger_kernel"),
         "harness.adapters.onnx_norms": pytest.mark.optional_libs("onnx")}


def _available(target: str) -> str:
    return release_target(target, *RELEASES[target]) if target in RELEASES else target


def test_the_table_has_rows_and_each_buggy_release_is_known_buggy():
    assert len(ROWS) >= 5
    for row in ROWS:
        module = row["buggy"].removeprefix("harness.adapters.")
        assert module in controls.KNOWN_BUGGY, f"row {row['n']}: {module} is not in controls.KNOWN_BUGGY"
        assert row["buggy"] not in controls.by_spec(), f"row {row['n']}: a buggy release is a control"
        assert row["property"] in controls.KNOWN_BUGGY[module], (row["n"], controls.KNOWN_BUGGY[module])
        if row["fixed"]:
            assert row["fixed"] in controls.by_spec(), f"row {row['n']}: the fixed release is not a control"


@pytest.mark.parametrize("row", [pytest.param(r, marks=MARKS.get(r["buggy"], ()), id=f"row{r['n']}") for r in ROWS])
def test_each_row_replays(row, capsys):
    from harness.cli import main as cli
    argv = list(row["argv"])
    at = argv.index("--impl") + 1
    argv[at] = _available(row["buggy"])
    assert cli(argv) == 1, f"row {row['n']}: the repro passes on the buggy release:\n{capsys.readouterr().out[-2000:]}"
    out = capsys.readouterr().out
    assert f"[{row['property']}] property violated" in out, out[-2000:]
    if row["fixed"]:
        argv[at] = _available(row["fixed"])
        assert cli(argv) == 0, f"row {row['n']}: the fixed release fails:\n{capsys.readouterr().out[-2000:]}"
