"""Model-level conformance: dependency profiles, BERT's size, input representation and inputs.

- ``dependency``: from the Jacobian of the outputs w.r.t. the input embeddings, which inputs
  each output feature depends on; a model is ``bidirectional`` (BERT: every feature at i
  depends on every j), ``causal`` (GPT: only j <= i) or ``concat_unidirectional`` (ELMo:
  each feature depends on j <= i or on j >= i only, both kinds present), and must be what
  its ``MODEL_CLAIM`` says. A dependency is absent when the Jacobian block is zero under
  the tolerance policy (float64 model: exact zeros from masked attention stay zero).
- ``param_count``: BERT-base and BERT-large have the published configurations' counts.
- ``embedding_sum``: the input representation is token + position + segment embeddings.
- ``special_placement``: [CLS] A [SEP] (B [SEP]) with segments 0 then 1.
- ``nsp``: next-sentence pairs are IsNext / NotNext 50/50, with correct labels.
"""
from __future__ import annotations

import pytest
import torch
from hypothesis import example, given, settings

from harness.spec import tolerance
from harness.boundary import guard
from harness.suites.strategies import NO_SHRINK
from harness.suites.bert.configs import (DELTA, SENTENCE_BASE, ModelConfig, NSPConfig, embedding_configs,
                                  hoeffding_radius, inputs_configs, model_configs, nsp_configs)
from harness.suites.kit import ImplementationError, impl, is_module, manual_seed, on_target, record_label, run
from harness.boundary.target_ops import attribute_tensor, count_parameters, seeded
from harness.reference.bert import CONFIGS, PARAMETERS, PUBLISHED, parameter_count

PROPERTY_PREFIX = "models"
PROFILES = ("bidirectional", "causal", "concat_unidirectional")
NSP_EXAMPLES = 3


def _zero_allowance(dtype: torch.dtype) -> float:
    """What the tolerance policy allows around an exact zero for this dtype."""
    return tolerance.allowance(torch.zeros((), dtype=torch.float64), dtype=dtype)


def _show(dep: torch.Tensor) -> str:
    rows = ["".join("1" if x else "." for x in r.tolist()) for r in dep]
    return "\n      " + "\n      ".join(rows)


def profile(dep: torch.Tensor) -> tuple[str | None, str]:
    """Classify per-feature dependencies dep (L_out, H, L_in) bool; returns (profile, evidence)."""
    L = dep.shape[0]
    i, j = torch.arange(L)[:, None, None], torch.arange(L)[None, None, :]
    past, future = (dep & (j < i)).any(dim=(0, 2)), (dep & (j > i)).any(dim=(0, 2))  # (H,)
    full = dep.all(dim=(0, 2))
    causal, anticausal = past & ~future, future & ~past
    if bool(full.all()):
        return "bidirectional", ""
    if bool(causal.all()):
        return "causal", ""
    if bool((causal | anticausal).all()) and bool(causal.any()) and bool(anticausal.any()):
        return "concat_unidirectional", ""
    k = int((~(full | causal | anticausal)).nonzero()[0]) if bool((~(full | causal | anticausal)).any()) else 0
    return None, f"feature {k} depends on (row = output position, column = input position):{_show(dep[:, k, :])}"


def jacobian(model, x) -> torch.Tensor:
    """(Runs next to the target's model: ``on_target``.) d model(x) / d x, vectorized (vmap over
    the backward) when the model's ops allow it, else one backward per output."""
    try:
        return torch.autograd.functional.jacobian(model, x, vectorize=True)
    except Exception:  # noqa: BLE001 - ops without batching rules: one backward per output
        return torch.autograd.functional.jacobian(model, x)


def prepare(model) -> tuple[torch.dtype, object]:
    """(Runs next to the target's model.) eval mode, float64 when the model can run in it;
    returns (dtype, embed_dim)."""
    model.eval()
    dtype = torch.float64
    try:
        model.double()
    except Exception:  # noqa: BLE001 - a model that cannot run in float64 is probed in float32
        dtype = torch.float32
    return dtype, getattr(model, "embed_dim", None)


def check_dependency(target, cfg):
    """The Jacobian's dependency profile (bidirectional / causal / concatenated unidirectional) is the one
    ``MODEL_CLAIM`` names; batch rows never mix."""
    claim = target.lookup("MODEL_CLAIM")
    if claim not in PROFILES:
        raise AssertionError(f"MODEL_CLAIM = {claim!r}, expected one of {PROFILES}")
    model = on_target(target, seeded, cfg.seed % 2**31, target.lookup("build_model"))
    if not is_module(model):
        raise ImplementationError(f"build_model() returned {type(model).__name__}, expected an nn.Module")
    dtype, D = on_target(target, prepare, model)
    if not isinstance(D, int):
        raise ImplementationError("build_model()'s module has no integer attribute embed_dim (the input dim D)")
    with torch.random.fork_rng(devices=[]):
        manual_seed(cfg.seed % 2**31)
        x = torch.randn(cfg.batch, cfg.length, D, dtype=dtype)
    out = guard.call(target.limit, model, "build_model()(inputs_embeds)", x)
    if not isinstance(out, torch.Tensor) or out.dim() != 3 or tuple(out.shape[:2]) != (cfg.batch, cfg.length):
        raise ImplementationError(f"the model returned {getattr(out, 'shape', type(out).__name__)}, "
                                  f"expected (B, L, H) = ({cfg.batch}, {cfg.length}, H)")
    jac = on_target(target, jacobian, model, x)  # (B, L, H, B, L, D)
    present = jac.abs() > _zero_allowance(dtype)
    if cfg.batch > 1:
        cross = present[0, :, :, 1:].any() | present[1:, :, :, 0].any()
        if bool(cross):
            raise AssertionError("outputs of batch row 0 depend on another batch row's inputs (or vice versa)")
    dep = torch.stack([present[b, :, :, b].any(dim=-1) for b in range(cfg.batch)]).any(0)  # (L, H, L)
    measured, evidence = profile(dep)
    if measured != claim:
        union = dep.any(dim=1)
        if evidence and _show(union) in evidence:
            evidence = ""  # the feature's pattern is the union's
        raise AssertionError(f"MODEL_CLAIM is {claim!r}, but the model is "
                             f"{measured or 'none of ' + '/'.join(PROFILES)} (length {cfg.length}). Output i depends "
                             f"on input j (row i, column j; any feature):{_show(union)}"
                             f"{chr(10) + '  ' + evidence if evidence else ''}")
    record_label(target, f"profile:{measured}")


def check_param_count(target, cfg):
    """BERT-base and BERT-large, with and without the pooler, have exactly the published
    configurations' parameter counts (reference.bert.parameter_count; 110 M and 340 M in the
    paper, rounded): base 109,482,240 / 108,891,648, large 335,141,888 / 334,092,288."""
    build = target.lookup("build_bert")
    for pooler in (True, False):
        got, _ = on_target(target, count_parameters, build, cfg.size, add_pooling_layer=pooler)
        expected = parameter_count(**CONFIGS[cfg.size], pooler=pooler)
        assert expected == PARAMETERS[cfg.size][0 if pooler else 1]
        if got != expected:
            raise AssertionError(
                f"BERT-{cfg.size} ({'with' if pooler else 'without'} the pooler) has {got:,} parameters, the "
                f"published configuration {expected:,} ({CONFIGS[cfg.size]}; the paper: "
                f"{PUBLISHED[cfg.size] / 1e6:.0f} M); difference {got - expected:+,}")


def check_embedding_sum(target, cfg):
    """The input representation is W[token] + P[position] + T[segment], measured by behaviour:
    changing one segment id changes that position's output by exactly T[1] - T[0] (and nothing
    else), and every output equals the sum of its token, position and segment parts, each
    recovered from probes with one factor changed. Defaults: segment 0, positions 0..L-1."""
    emb = on_target(target, seeded, cfg.seed % 2**31, target.lookup("bert_embeddings"), cfg.vocab_size,
                    cfg.hidden_size, max_position_embeddings=cfg.max_positions, type_vocab_size=2)
    guard.call(target.limit, emb.eval, "bert_embeddings(...).eval")
    g = cfg.generator(1)
    B, L = cfg.batch, cfg.length
    ids = torch.randint(cfg.vocab_size, (B, L), generator=g)
    seg = torch.randint(2, (B, L), generator=g)
    pos = torch.arange(L).expand(B, L)

    def f(i, s=None, p=None):
        with torch.no_grad():
            out = guard.call(target.limit, emb, "bert_embeddings(...)", i, token_type_ids=s, position_ids=p)
        if not isinstance(out, torch.Tensor) or tuple(out.shape) != (*i.shape, cfg.hidden_size):
            raise ImplementationError(f"the embedding returned {getattr(out, 'shape', type(out).__name__)}, "
                                      f"expected {(*i.shape, cfg.hidden_size)}")
        return out.double()

    def close(a, b, what):
        tolerance.assert_close(a, b, dtype=torch.float32, what=what)

    out = f(ids, seg, pos)
    close(f(ids), f(ids, torch.zeros_like(seg), pos), "output with default segment / position ids "
          "(expected segment 0 and positions 0..L-1)")
    a = int(ids[0, 0])
    base = f(torch.full((1, L), a), torch.zeros(1, L, dtype=torch.long), pos[:1])[0]  # W[a] + P[p] + T[0]
    seg_delta = f(torch.full((1, L), a), torch.ones(1, L, dtype=torch.long), pos[:1])[0] - base  # T[1] - T[0]
    if float(seg_delta.abs().max()) == 0.0:
        raise AssertionError("segment ids change nothing: the segment embedding is not added")
    close(seg_delta, seg_delta[:1].expand_as(seg_delta), "segment change T[1] - T[0] (must not depend on the position)")
    table = on_target(target, attribute_tensor, emb, "token_type_embeddings", "weight")
    if table is not None and table.dim() == 2 and table.shape[0] >= 2:
        close(seg_delta[0], (table[1] - table[0]).double(),
              "segment change vs token_type_embeddings.weight[1] - [0]")
    flipped = seg.clone()
    flipped[0, L // 2] = 1 - flipped[0, L // 2]
    change = f(ids, flipped, pos) - out
    expected = torch.zeros_like(change)
    expected[0, L // 2] = seg_delta[0] * (1 if flipped[0, L // 2] == 1 else -1)
    close(change, expected, f"output change when the segment id at (0, {L // 2}) is flipped")
    words = ids.unique()
    probes = f(words[:, None].expand(len(words), L), torch.zeros(len(words), L, dtype=torch.long),
               pos[:1].expand(len(words), L))  # W[w] + P[p] + T[0]
    word_delta = probes[:, 0] - base[0]  # W[w] - W[a]
    predicted = base[None] + word_delta[torch.searchsorted(words, ids)] + seg[..., None] * seg_delta[0]
    close(out, predicted, "output vs W[token] + P[position] + T[segment] recovered from one-factor probes")
    close(probes - probes[:, :1], (base - base[:1])[None].expand_as(probes),
          "position part P[p] - P[0] (must not depend on the token)")


def check_special_placement(target, cfg):
    """[CLS] A [SEP] for one sentence, [CLS] A [SEP] B [SEP] for two; token_type_ids 0 through
    the first [SEP] and 1 for B and its [SEP]; the default ids are bert-base-uncased's 101/102
    and explicit cls_id / sep_id are used."""
    a, b = cfg.sentences()
    build = impl(target, "build_inputs")
    for kw, cls, sep in (({}, 101, 102), ({"cls_id": 7, "sep_id": 9}, 7, 9)):
        out = build(a, b, **kw)
        if not (isinstance(out, (tuple, list)) and len(out) == 2):
            raise ImplementationError(f"build_inputs returned {type(out).__name__}, "
                                      f"expected (input_ids, token_type_ids)")
        ids, types = (torch.as_tensor(t).long().flatten().tolist() for t in out)
        want_ids = [cls, *a, sep] + ([*b, sep] if b is not None else [])
        want_types = [0] * (len(a) + 2) + ([1] * (len(b) + 1) if b is not None else [])
        what = f"{'pair' if b is not None else 'single sentence'} (|A| = {len(a)}, |B| = {len(b or [])})"
        if ids != want_ids:
            raise AssertionError(f"{what}: input_ids {ids}, expected {want_ids}")
        if types != want_types:
            raise AssertionError(f"{what}: token_type_ids {types}, expected {want_types}")


def check_nsp(target, cfg: NSPConfig):
    """IsNext (label 0) pairs are consecutive sentences of one document; NotNext (label 1) pairs'
    B is not A's successor; IsNext is drawn 50 % of the time.

    Bound: Hoeffding over 100,000 pairs, delta = 1e-6 / 3 examples: radius 0.0088, so an
    IsNext rate off by 2 points fails.
    """
    docs = cfg.corpus()
    pairs = impl(target, "make_nsp_pairs")(docs, cfg.pairs, generator=cfg.generator(1))
    if len(pairs) != cfg.pairs:
        raise AssertionError(f"{len(pairs)} pairs returned, {cfg.pairs} requested")
    is_next = 0
    for n, pair in enumerate(pairs):
        a, b, label = pair
        (da, ka), (db, kb) = (divmod(int(s[0]) - SENTENCE_BASE, 1000) for s in (a, b))
        if list(a) != docs[da][ka] or list(b) != docs[db][kb]:
            raise AssertionError(f"pair {n}: the sentences are not sentences of the corpus")
        follows = da == db and kb == ka + 1
        if int(label) == 0:
            is_next += 1
            if not follows:
                raise AssertionError(f"pair {n} is labelled IsNext (0), but B is sentence {kb} of document {db} and A "
                                     f"sentence {ka} of document {da}")
        elif int(label) == 1:
            if follows:
                raise AssertionError(f"pair {n} is labelled NotNext (1), but B (sentence {kb}) follows A (sentence "
                                     f"{ka}) in document {da}: draw B from another document, as BERT does")
        else:
            raise AssertionError(f"pair {n} has label {label!r}; 0 = IsNext, 1 = NotNext")
    rate, radius = is_next / cfg.pairs, hoeffding_radius(cfg.pairs, DELTA / NSP_EXAMPLES)
    if abs(rate - 0.5) > radius:
        raise AssertionError(f"{100 * rate:.2f} % of {cfg.pairs:,} pairs are IsNext, expected 50 % (+-"
                             f"{100 * radius:.2f} points, Hoeffding, delta = 3.3e-7)")


@pytest.mark.needs("build_model", "MODEL_CLAIM")
@settings(max_examples=5, phases=NO_SHRINK)
@given(cfg=model_configs())
def test_dependency(target, cfg):
    run(target, check_dependency, cfg)


@pytest.mark.needs("build_bert")
@settings(max_examples=2, phases=NO_SHRINK)
@given(cfg=model_configs(sizes=("base", "large")))
@example(cfg=ModelConfig(batch=1, length=2, seed=0, size="base"))
@example(cfg=ModelConfig(batch=1, length=2, seed=0, size="large"))
def test_param_count(target, cfg):
    run(target, check_param_count, cfg)


@pytest.mark.needs("bert_embeddings")
@settings(max_examples=10, phases=NO_SHRINK)
@given(cfg=embedding_configs())
def test_embedding_sum(target, cfg):
    run(target, check_embedding_sum, cfg)


@pytest.mark.needs("build_inputs")
@settings(phases=NO_SHRINK)
@given(cfg=inputs_configs())
def test_special_placement(target, cfg):
    run(target, check_special_placement, cfg)


@pytest.mark.needs("make_nsp_pairs")
@settings(max_examples=NSP_EXAMPLES, phases=NO_SHRINK)
@given(cfg=nsp_configs())
def test_nsp(target, cfg):
    run(target, check_nsp, cfg)
