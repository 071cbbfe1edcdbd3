"""``fits.json``: the log-log exponent of each scaling case, time ~ c * n^p over the upper half.

The fit itself is ``harness.stats.fit_loglog`` with ``points=FIT_POINTS``; the report's plots call
it with the same choice for a curve fits.json does not cover, so a plotted exponent is the stored one.
"""
from __future__ import annotations

from collections import defaultdict

from harness.stats import fit_loglog

#: which sizes of a sweep every scaling exponent is fitted over (see ``harness.stats.fit_loglog``)
FIT_POINTS = "upper_half"


def fits_from_rows(rows: list[dict], suite: str = "scaling", x: str = "n",
                   y: str = "time_s") -> dict[str, dict]:
    """``fits.json``: one fit per case of ``suite`` over its ok rows (keyed "suite|case").

    Rows of one case that differ in other parameters (batch, heads, ...) are fitted
    separately, keyed "suite|case|param=value,...", when there is more than one group.
    """
    groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for r in rows:
        if r.get("suite") != suite or r.get("status") != "ok":
            continue
        params = {k: v for k, v in (r.get("params") or {}).items() if k != x}
        tag = ",".join(f"{k}={params[k]}" for k in sorted(params))
        groups[(r["case"], tag)].append(r)
    tags_per_case: dict[str, set] = defaultdict(set)
    for case, tag in groups:
        tags_per_case[case].add(tag)
    out: dict[str, dict] = {}
    for (case, tag), rs in sorted(groups.items()):
        f = fit_loglog([r["params"].get(x) for r in rs], [(r.get("metrics") or {}).get(y) for r in rs],
                       points=FIT_POINTS)
        if f is None:
            continue
        key = f"{suite}|{case}" if len(tags_per_case[case]) == 1 else f"{suite}|{case}|{tag}"
        out[key] = f
    return out
