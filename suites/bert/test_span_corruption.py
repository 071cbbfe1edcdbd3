"""T5 span corruption (the seeds: "My teddy bear <S1> and reading" / "<S1> is cute <S2>").

    inputs, targets = span_corruption(tokens, sentinel_ids=ids, noise_density=rho,
                                      mean_span_length=mu, generator=g)

tokens (L,) int64. Each corrupted span is replaced in ``inputs`` by the next
sentinel (sentinel_ids[0], [1], ... in order); ``targets`` is each sentinel
followed by its span, optionally ending with one more sentinel (the T5 paper's
and the seed's final sentinel). A fraction rho of the tokens is corrupted, in
spans of mean length mu. The sentinels are T5-like (vocab_size - 1, - 2, ...) and
never occur in the tokens.

Statistical properties use ``calls`` = 6000 sequences per example and state a
false-failure bound <= DELTA = 1e-6 per test (union over its examples) from the
empirical Bernstein inequality over sequences, which needs only that calls are
independent (one generator, drawn on), not that tokens are.
"""
from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings

from harness.suites.bert.configs import DELTA, SpanConfig, empirical_bernstein_radius, span_configs
from harness.suites.strategies import NO_SHRINK
from harness.suites.kit import ImplementationError, call_each, impl, manual_seed, run

PROPERTY_PREFIX = "span_corruption"
SPAN = "span_corruption"
pytestmark = pytest.mark.needs(SPAN)
STAT_EXAMPLES = 2


def call_span(target, cfg: SpanConfig, tokens, generator=None):
    """The target's (inputs, targets) as CPU int64."""
    return checked_output(impl(target, SPAN)(tokens, generator=generator, **cfg.kwargs()))


def checked_output(out) -> tuple:
    """One call's (inputs, targets) as CPU int64; an ImplementationError when it is not that."""
    if not (isinstance(out, (tuple, list)) and len(out) == 2):
        raise ImplementationError(f"{SPAN} returned {type(out).__name__}; the protocol returns (inputs, targets)")
    result = []
    for name, t in zip(("inputs", "targets"), out):
        if not isinstance(t, torch.Tensor) or t.dim() != 1 or t.dtype.is_floating_point or t.dtype == torch.bool:
            raise ImplementationError(f"{SPAN} returned {name} {getattr(t, 'dtype', type(t).__name__)} "
                                      f"{tuple(getattr(t, 'shape', ()))}, expected a 1-D integer tensor")
        result.append(t.detach().cpu().long())
    return tuple(result)


def split_targets(targets: list[int], sentinels: set[int]) -> list[tuple[int, list[int]]]:
    """[(sentinel, span)] in order; raises if the targets do not start with a sentinel."""
    groups: list[tuple[int, list[int]]] = []
    for tok in targets:
        if tok in sentinels:
            groups.append((tok, []))
        elif not groups:
            raise AssertionError(f"targets start with {tok}, not a sentinel: targets = {targets[:20]}")
        else:
            groups[-1][1].append(tok)
    return groups


def _parse(cfg, tokens, inputs, targets):
    sentinels = set(cfg.sentinel_ids)
    inp, tgt = inputs.tolist(), targets.tolist()
    in_sent = [x for x in inp if x in sentinels]
    groups = split_targets(tgt, sentinels)
    trailing = len(groups) == len(in_sent) + 1 and not groups[-1][1]
    spans = groups[:-1] if trailing else groups
    return inp, tgt, in_sent, groups, spans, trailing


def _show(tokens, inputs, targets) -> str:
    return f"\n  tokens  {tokens.tolist()[:40]}\n  inputs  {inputs.tolist()[:40]}\n  targets {targets.tolist()[:40]}"


def check_reconstruction(target, cfg):
    """inputs with the i-th sentinel replaced by the i-th span of the targets is the original
    sequence, exactly (nothing dropped, duplicated or reordered)."""
    tokens = cfg.tokens()
    inputs, targets = call_span(target, cfg, tokens, cfg.generator(1))
    inp, _, in_sent, _, spans, _ = _parse(cfg, tokens, inputs, targets)
    if len(spans) != len(in_sent):
        raise AssertionError(f"the inputs hold {len(in_sent)} sentinels, the targets {len(spans)} spans"
                             f"{_show(tokens, inputs, targets)}")
    sentinels, out, k = set(cfg.sentinel_ids), [], 0
    for x in inp:
        if x in sentinels:
            out += spans[k][1]
            k += 1
        else:
            out.append(x)
    if out != tokens.tolist():
        first = next((i for i, (a, b) in enumerate(zip(out, tokens.tolist())) if a != b), min(len(out), len(tokens)))
        raise AssertionError(f"inputs + targets rebuild {len(out)} tokens, the original has {len(tokens)}; first "
                             f"difference at position {first}{_show(tokens, inputs, targets)}")


def check_sentinels(target, cfg):
    """The inputs' sentinels are sentinel_ids[0], [1], ... in order, each once; the targets hold
    the same sentinels in the same order (plus, optionally, the next one at the end)."""
    tokens = cfg.tokens()
    inputs, targets = call_span(target, cfg, tokens, cfg.generator(2))
    _, _, in_sent, groups, _, trailing = _parse(cfg, tokens, inputs, targets)
    expected = cfg.sentinel_ids[:len(in_sent)]
    if in_sent != expected:
        raise AssertionError(f"the inputs' sentinels are {in_sent[:10]}, expected {expected[:10]} (one new sentinel "
                             f"per span, in the order given){_show(tokens, inputs, targets)}")
    tgt_sent = [s for s, _ in groups]
    allowed = [expected, expected + cfg.sentinel_ids[len(expected):len(expected) + 1]]
    if tgt_sent not in allowed:
        raise AssertionError(f"the targets' sentinels are {tgt_sent[:10]}, the inputs' {in_sent[:10]}"
                             f"{' (trailing sentinel allowed: ' + str(allowed[1][-1:]) + ')' if trailing else ''}"
                             f"{_show(tokens, inputs, targets)}")


def check_spans(target, cfg):
    """No empty span (each sentinel in the targets is followed by at least one token, except an
    optional final sentinel), and spans are maximal: two sentinels never touch in the inputs."""
    tokens = cfg.tokens()
    inputs, targets = call_span(target, cfg, tokens, cfg.generator(3))
    inp, _, _, _, spans, _ = _parse(cfg, tokens, inputs, targets)
    empty = [i for i, (_, span) in enumerate(spans) if not span]
    if empty:
        raise AssertionError(f"span(s) {empty[:10]} of {len(spans)} are empty: a sentinel with nothing to predict"
                             f"{_show(tokens, inputs, targets)}")
    sentinels = set(cfg.sentinel_ids)
    touching = [i for i in range(len(inp) - 1) if inp[i] in sentinels and inp[i + 1] in sentinels]
    if touching:
        raise AssertionError(f"sentinels touch at input position(s) {touching[:10]}: adjacent corrupted spans must "
                             f"be one span (T5 separates spans by kept tokens){_show(tokens, inputs, targets)}")


#: group-sequential checkpoints (besides the last call): a correct target runs all ``calls``, a
#: gross error fails early; delta is split over the checkpoints (union bound)
CHECKPOINTS = (500, 1500)


def _lengths(seqs) -> torch.Tensor:
    return torch.tensor([len(t) for t in seqs], dtype=torch.float32)


def _counts(seqs, lowest: int) -> torch.Tensor:
    """(len(seqs),) float: the entries >= ``lowest`` (sentinels) in each 1-D tensor, in one pass."""
    which = torch.repeat_interleave(torch.arange(len(seqs)), torch.tensor([len(t) for t in seqs]))
    return torch.zeros(len(seqs)).index_add_(0, which, (torch.cat(seqs) >= lowest).float())


def _sequential(target, cfg, column: int, expected: float, value_range: float):
    """Call the target ``cfg.calls`` times on one generator; at each checkpoint n test
    |mean - expected| <= empirical Bernstein radius of the first n per-sequence values of
    ``column`` (0: corrupted tokens / L, 1: spans / L), delta = DELTA / (examples x checkpoints).
    Returns None, or (n, mean, radius, values so far) for the first checkpoint that fails."""
    g = cfg.generator(4)
    lowest = min(cfg.sentinel_ids)  # the sentinels are the top ids; tokens lie below them
    points = [c for c in CHECKPOINTS if c < cfg.calls] + [cfg.calls]
    delta = DELTA / (STAT_EXAMPLES * len(points))
    values = torch.empty(cfg.calls, 2)
    sequences = [cfg.tokens(salt=10 + k) for k in range(16)]
    done = 0
    for n in points:  # the calls up to each checkpoint, then its test
        outs = call_each(target, SPAN, [(sequences[i % 16],) for i in range(done, n)],
                         dict(generator=g, **cfg.kwargs()))
        inputs, targets = zip(*(checked_output(out) for out in outs))
        values[done:n, 0] = (_lengths(targets) - _counts(targets, lowest)) / cfg.length  # corrupted tokens
        values[done:n, 1] = _counts(inputs, lowest) / cfg.length  # spans: one sentinel each in the inputs
        done = n
        x = values[:n, column]
        radius = empirical_bernstein_radius(x, delta, value_range)
        if abs(float(x.mean()) - expected) > radius:
            return n, float(x.mean()), radius, values[:n]
    return None


def check_noise_density(target, cfg):
    """The mean corrupted fraction over 6000 sequences is noise_density (default 0.15; empirical Bernstein
    bound).

    Lengths make L * rho an integer (T5's rounding is then exact). Bound: empirical Bernstein
    over the per-sequence fractions in [0, 1] at 3 checkpoints (500, 1500, 6000 sequences),
    delta = 1e-6 / (2 examples x 3): at n = 6000 the radius is
    sqrt(2 V ln(4/delta) / n) + 7 ln(4/delta) / (3 (n - 1)) = 0.0066 for T5's fixed counts
    (V = 0), ~0.009 for per-token random schemes (V ~ rho (1 - rho) / L); a density off by
    2 points fails (2 x 0.009 < 0.02).
    """
    failed = _sequential(target, cfg, 0, cfg.rho, 1.0)
    if failed:
        n, mean, radius, _ = failed
        raise AssertionError(f"{100 * mean:.2f} % of the tokens were corrupted over {n} sequences of "
                             f"{cfg.length}; noise_density = {cfg.rho} (+-{100 * radius:.2f} points, empirical "
                             f"Bernstein)")


def check_span_length(target, cfg):
    """Spans have mean length mean_span_length (default 3): spans per token = rho / mu = noise_density /
    mean_span_length.

    Lengths make L rho / mu an integer. Bound: empirical Bernstein over the per-sequence
    spans / L, which lie in [0, 1/2 + 1/2L] for maximal spans, at the same 3 checkpoints,
    delta = 1e-6 / (2 examples x 3): radius 0.0033 at n = 6000 (+ a variance term, 0 for T5),
    ~7 % of rho / mu = 0.05 at the defaults; a mean span length off by ~15 % or more fails
    (span lengths of 1, or mu ignored, fail by far).
    """
    expected = cfg.rho / cfg.mu
    failed = _sequential(target, cfg, 1, expected, 0.5 + 0.5 / cfg.length)
    if failed:
        n, mean, radius, values = failed
        realized = float(values[:, 0].sum() / values[:, 1].sum()) if float(values[:, 1].sum()) else float("inf")
        raise AssertionError(f"{mean * cfg.length:.3f} spans per sequence of {cfg.length} over {n} sequences (mean "
                             f"span length {realized:.3f}); noise_density {cfg.rho} / mean_span_length {cfg.mu} "
                             f"gives {expected * cfg.length:.3f} (+-{radius * cfg.length:.3f}, empirical Bernstein)")


def check_generator(target, cfg):
    """The same seed gives the same output whatever the global RNG state; another seed, or the
    next call on the same generator, gives another corruption. (L = 100 or 120 at the defaults, >= 5
    spans: two independent T5 corruptions coincide with probability < 1e-9.)"""
    tokens = cfg.tokens()
    seed = cfg.seed % 2**31
    with torch.random.fork_rng(devices=[]):
        manual_seed(1)
        a = call_span(target, cfg, tokens, torch.Generator().manual_seed(seed))
        manual_seed(2)
        b = call_span(target, cfg, tokens, torch.Generator().manual_seed(seed))
        c = call_span(target, cfg, tokens, torch.Generator().manual_seed(seed + 1))
    if not all(torch.equal(x, y) for x, y in zip(a, b)):
        raise AssertionError("two calls with generators seeded alike differ when the global RNG state differs: the "
                             "corruption does not draw from the generator it is given")
    if all(torch.equal(x, y) for x, y in zip(a, c)) and a[0].shape == c[0].shape:
        raise AssertionError(f"generators seeded {seed} and {seed + 1} gave the same corruption")
    g = torch.Generator().manual_seed(seed)
    first, second = call_span(target, cfg, tokens, g), call_span(target, cfg, tokens, g)
    if all(torch.equal(x, y) for x, y in zip(first, second)) and first[0].shape == second[0].shape:
        raise AssertionError("two calls on one generator gave the same corruption (static corruption)")


@settings(phases=NO_SHRINK)
@given(cfg=span_configs())
def test_reconstruction(target, cfg):
    run(target, check_reconstruction, cfg)


@settings(phases=NO_SHRINK)
@given(cfg=span_configs())
def test_sentinels(target, cfg):
    run(target, check_sentinels, cfg)


@settings(phases=NO_SHRINK)
@given(cfg=span_configs())
def test_spans(target, cfg):
    run(target, check_spans, cfg)


@settings(max_examples=STAT_EXAMPLES, phases=NO_SHRINK)
@given(cfg=span_configs(statistical=True))
def test_noise_density(target, cfg):
    run(target, check_noise_density, cfg)


@settings(max_examples=STAT_EXAMPLES, phases=NO_SHRINK)
@given(cfg=span_configs(statistical=True))
def test_span_length(target, cfg):
    run(target, check_span_length, cfg)


@settings(max_examples=10, phases=NO_SHRINK)
@given(cfg=span_configs(statistical=True).map(lambda c: SpanConfig(length=c.length, noise_density=None,
                                                                   mean_span_length=None, vocab_size=c.vocab_size,
                                                                   seed=c.seed)))
def test_generator(target, cfg):
    run(target, check_generator, cfg)
