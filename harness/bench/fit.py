"""``fits.json``: the log-log exponent of each scaling case and pass, time ~ c * n^p over the upper half.

The fit itself is ``harness.spec.stats.fit_loglog`` with ``points=FIT_POINTS``; the report's plots call
it with the same choice for a curve fits.json does not cover, so a plotted exponent is the stored one.

Keys: ``"<suite>|<case>"`` for the forward (the key fits.json had before passes existed) and
``"<suite>|<case>:<pass>"`` for the backward ("bwd") and forward+backward ("fwd_bwd"); each entry
also names its ``case`` and ``pass``.
"""
from __future__ import annotations

from collections import defaultdict

from harness.verdicts.runfolder import DEFAULT_PASS, pass_of
from harness.spec.stats import fit_loglog

#: which sizes of a sweep every scaling exponent is fitted over (see ``harness.spec.stats.fit_loglog``)
FIT_POINTS = "upper_half"


def fit_key(suite: str, case: str, pass_: str = DEFAULT_PASS) -> str:
    """The fits.json key of ``case``'s ``pass_`` (module doc)."""
    return f"{suite}|{case}" if pass_ == DEFAULT_PASS else f"{suite}|{case}:{pass_}"


def fits_from_rows(rows: list[dict], suite: str = "scaling", x: str = "n",
                   y: str = "time_s") -> dict[str, dict]:
    """``fits.json``: one fit per case and pass of ``suite`` over its ok rows (keyed ``fit_key``;
    a row without a ``pass`` parameter is a forward row).

    Rows of one case and pass that differ in other parameters (batch, heads, ...) are fitted
    separately, keyed "<fit key>|param=value,...", when there is more than one group.
    """
    groups: dict[tuple[str, str, str], list[dict]] = defaultdict(list)
    for r in rows:
        if r.get("suite") != suite or r.get("status") != "ok":
            continue
        params = {k: v for k, v in (r.get("params") or {}).items() if k not in (x, "pass")}
        tag = ",".join(f"{k}={params[k]}" for k in sorted(params))
        groups[(r["case"], pass_of(r.get("params")), tag)].append(r)
    tags: dict[tuple[str, str], set] = defaultdict(set)
    for case, pass_, tag in groups:
        tags[(case, pass_)].add(tag)
    out: dict[str, dict] = {}
    for (case, pass_, tag), rs in sorted(groups.items()):
        f = fit_loglog([r["params"].get(x) for r in rs], [(r.get("metrics") or {}).get(y) for r in rs],
                       points=FIT_POINTS)
        if f is None:
            continue
        key = fit_key(suite, case, pass_)
        out[key if len(tags[(case, pass_)]) == 1 else f"{key}|{tag}"] = {**f, "case": case, "pass": pass_}
    return out
