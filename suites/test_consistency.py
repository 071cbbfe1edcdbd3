"""Differential checks: the session's targets (several ``--impl``, e.g. one library's backends) held
to each other, as torch's fused SDPA backends are checked against its math backend.

Each test is one protocol name. It runs only when two or more loaded targets define it; it draws
a configuration, calls every such target on the same seeded inputs, the way a model calls the
name (the protocol's defaults left to the target: the per-target suites mostly pass every
argument explicitly, so a default one backend gets wrong can pass them all), and compares each
output with the first target's. Two outputs that are each within the tolerance policy of the
float64 reference are within twice its allowance of each other; more is a disagreement. Buckets
(integers) must be equal, except where the float32 logarithm lands within 1e-4 of a bucket
boundary (as ``t5_bucket``); ALiBi is compared up to the per-row constant softmax ignores, on the
causal keys. A disagreement is reported in the consistency section (the test is xfailed) and
fails only with ``--require-consistent``. A target that raises on an input is left out of that
comparison (its own suites report it); a configuration a target does not support is compared
among the others.

    shape notation: q (B, Hq, L, E), k (B, Hkv, S, E), v (B, Hkv, S, Ev); x (B, H, L, D)
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

import pytest
import torch
from hypothesis import assume, given
from hypothesis import strategies as st

from harness import protocol, tolerance
from suites.attention.configs import attn_configs, window_configs
from suites import consistency_models as models
from suites import consistency_varlen as varlen
from suites.bert.configs import distill_configs, embedding_configs, inputs_configs, model_configs
from suites.kvcache import configs as kvc
from suites.kvcache import helpers as kv
from suites.norms import helpers as norms
from suites.norms.configs import norm_configs
from suites.positions.configs import (alibi_configs, rope_configs, sinusoidal_configs,
                                       t5_bias_configs, t5_bucket_configs)
from suites.kit import ImplementationError, Unsupported, impl, require_features
from harness.loader import BrokenTarget, Missing
from reference.alibi import alibi_distance, alibi_math, get_slopes
from reference.layernorm import layer_norm_math
from reference.rmsnorm import rms_norm_math
from reference.rope import LAYOUTS
from reference.sinusoidal import sinusoidal_math
from reference.sliding_window import sliding_window_math
from reference.t5_bias import relative_positions
from suites.attention.helpers import naive as attention_naive
from suites.attention.helpers import truth as attention_truth
from suites.positions.helpers import rope_naive, rope_truth
from suites.bert.test_distillation import distillation_naive, distillation_truth
from suites.positions.test_t5_bucket import accepted

#: the plug-in reads it: these tests compare targets with each other (the consistency section),
#: they are not properties of one target
CONSISTENCY = True


@dataclass(frozen=True)
class Case:
    """One protocol name's differential check.

    ``calls(cfg, device)``: [(label, args, kwargs)], the calls made on every target;
    ``judge(cfg, label, args, kwargs, out_dtype)``: (transform of an output to the compared tensor, float64 CPU;
    what two compared outputs may differ by, or None for "exactly, except where ``exempt``");
    ``exempt``: (cfg, label, args) -> bool mask of entries either value may take (or None);
    ``out_dtype``: the least precise floating dtype the compared targets returned (the yardstick's);
    ``invoke``: how one target is called (modules: built alike, then called)."""

    configs: st.SearchStrategy
    calls: Callable
    judge: Callable
    exempt: Callable | None = None
    #: (target, name, cfg, args, kwargs) -> output; default: the name called on copies of the tensors
    #: (a target that writes into an argument, as attention_with_kvcache does, writes into its own);
    #: None: the target does not support this call (it is compared on the others)
    invoke: Callable | None = None
    #: label -> the label of the call whose output (the first target's) it is compared with instead
    #: of its own (the paged call against the linear one: the same logical contents)
    against: dict[str, str] | None = None


def _cpu(out) -> torch.Tensor:
    if not isinstance(out, torch.Tensor):
        raise ImplementationError(f"returned {type(out).__name__}, expected a Tensor")
    return out.detach().cpu().to(torch.float64)


def _policy(truth, naive, dtype):
    """2 x the policy's allowance (each output may be off the float64 truth by one)."""
    return 2 * tolerance.allowance(truth, naive, dtype=dtype)


def _sdpa_calls(cfg, device):
    q, k, v = cfg.qkv(device)
    return [("plain", (q, k, v), {}), ("is_causal=True", (q, k, v), {"is_causal": True})]


def _sdpa_judge(cfg, label, args, kwargs, out_dtype):
    q, k, v = args  # the attention suites' yardstick: the worst of the three scale placements
    return _cpu, _policy(attention_truth(q, k, v, **kwargs), attention_naive(q, k, v, **kwargs), q.dtype)


def _window_calls(cfg, device):
    q, k, v = cfg.qkv(device)
    return [("default scale", (q, k, v, cfg.window), {})]


def _window_judge(cfg, label, args, kwargs, out_dtype):
    q, k, v = (t.cpu() for t in args[:3])
    truth = sliding_window_math(q, k, v, cfg.window)
    return _cpu, _policy(truth, sliding_window_math(q, k, v, cfg.window, compute_dtype=q.dtype), q.dtype)


def _rope_calls(cfg, device):
    return [("default base", (cfg.x(device), cfg.positions(device)), {})]


def _rope_judge(cfg, label, args, kwargs, out_dtype):
    x, pos = (t.cpu() for t in args)
    truth = rope_truth(x, pos, 10000.0, "rotate_half")  # (the yardstick's size: the worse layout's)
    naive = tolerance.worst_naive(truth, [rope_naive(x, pos, 10000.0, lay) - rope_truth(x, pos, 10000.0, lay)
                                          + truth for lay in LAYOUTS])
    return _cpu, _policy(truth, naive, x.dtype)


def _alibi_calls(cfg, device):
    return [("bias", (cfg.heads, cfg.Lq, cfg.Lk), {})]


def _alibi_judge(cfg, label, args, kwargs, out_dtype):
    H, Lq, Lk = args
    p = torch.arange(Lq) + (Lk - Lq)
    causal = alibi_distance(Lq, Lk) >= 0

    def relative(out):  # minus each row's value at its own position; the causal keys only
        out = _cpu(out)
        rel = out - out.gather(-1, p.view(1, Lq, 1).expand(H, Lq, 1))
        return rel.masked_fill(~causal, 0)

    truth = alibi_math(H, Lq, Lk)
    return relative, _policy(truth, alibi_math(H, Lq, Lk, compute_dtype=out_dtype).double(), out_dtype)


def _bucket_calls(cfg, device):
    rp = cfg.relative_positions(device)
    return [("defaults", (rp,), {}), ("bidirectional=False", (rp,), {"bidirectional": False})]


def _exact(cfg, label, args, kwargs, out_dtype):
    return (lambda out: _cpu(out)), None


def _bucket_exempt(cfg, label, args, kwargs):
    lo, hi = accepted(args[0].cpu(), kwargs.get("bidirectional", True), 32, 128)
    return lo != hi


def _defaults(cfg):
    """The protocol's T5 defaults (num_buckets=32, max_distance=128, bidirectional), so the config
    printed is the one called."""
    return replace(cfg, num_buckets=32, max_distance=128, bidirectional=True)


def _bias_calls(cfg, device):
    table = cfg.table().to(device)  # (32, H): the default num_buckets
    return [("defaults", (table, cfg.Lq, cfg.Lk), {})]


def _bias_exempt(cfg, label, args, kwargs):
    lo, hi = accepted(relative_positions(cfg.Lq, cfg.Lk), True, 32, 128)
    return (lo != hi).expand(cfg.heads, cfg.Lq, cfg.Lk)


def _sinusoidal_calls(cfg, device):
    return [("table", (cfg.num_positions, cfg.dim), {})]


def _sinusoidal_judge(cfg, label, args, kwargs, out_dtype):
    truth = sinusoidal_math(*args)
    return _cpu, _policy(truth, sinusoidal_math(*args, compute_dtype=out_dtype).double(), out_dtype)


def _slopes_calls(cfg, device):
    return [("slopes", (cfg.heads,), {})]


def _slopes_judge(cfg, label, args, kwargs, out_dtype):
    truth = torch.tensor(get_slopes(args[0]), dtype=torch.float64)
    return _cpu, _policy(truth, truth.to(out_dtype).double(), out_dtype)


_NORM_EPS = {"LayerNorm": 1e-5, "RMSNorm": 1e-6}


def _norm_calls(cfg, device):
    weight, bias = cfg.params()
    return [("affine, eps given", (cfg.x(device),), {"weight": weight, "bias": bias})]


def _norm_case(name: str, math: Callable) -> Case:
    """``name(shape, eps)`` built on every target with the same weight (and bias), called on one x."""
    def invoke(target, _, cfg, args, kwargs):
        params = kwargs if name == "LayerNorm" else {"weight": kwargs["weight"]}
        mod = norms.build(target, name, cfg, _NORM_EPS[name], **params)
        return norms.forward(target, mod, name, args[0])

    def judge(cfg, label, args, kwargs, out_dtype):
        x, eps = args[0], _NORM_EPS[name]
        kw = dict(normalized_shape=cfg.normalized_shape, weight=kwargs["weight"], eps=eps,
                  **({"bias": kwargs["bias"]} if name == "LayerNorm" else {}))
        return _cpu, _policy(norms.truth(math, x, **kw), norms.naive(math, x, **kw), x.dtype)

    return Case(norm_configs(), _norm_calls, judge, invoke=invoke)


def _distill_calls(cfg, device):
    s, t = cfg.logits(device)
    return [("temperature 1 (default)", (s, t), {}), (f"temperature {cfg.temperature:g}", (s, t),
                                                      {"temperature": cfg.temperature})]


def _distill_judge(cfg, label, args, kwargs, out_dtype):
    s, t = (a.cpu() for a in args)
    T = kwargs.get("temperature", 1.0)
    return _cpu, _policy(distillation_truth(s, t, T), distillation_naive(s, t, T), s.dtype)


def _inputs_calls(cfg, device):
    a, b = cfg.sentences()
    return [("defaults", (a, b), {})]


def _joined(out) -> torch.Tensor:
    """(input_ids, token_type_ids) as one (2, L) tensor."""
    if not (isinstance(out, (tuple, list)) and len(out) == 2):
        raise ImplementationError(f"returned {type(out).__name__}, expected (input_ids, token_type_ids)")
    ids, types = (torch.as_tensor(o).detach().cpu().reshape(-1).to(torch.float64) for o in out)
    if ids.shape != types.shape:
        raise AssertionError(f"input_ids {tuple(ids.shape)} and token_type_ids {tuple(types.shape)} differ in length")
    return torch.stack([ids, types])


_LINEAR, _PAGED = "ragged cache_seqlens", "paged (block_table), against the linear call"


def _kv_calls(cfg, device):
    """The linear call, and the same logical contents in a paged pool (``cfg.block_size``)."""
    q, k, v = cfg.qkv(device)
    qn, kn, vn = kv.new_tokens(cfg, q), kv.new_tokens(cfg, k), kv.new_tokens(cfg, v)
    kc, vc = kv.prefilled(cfg, k, v, device)
    table = cfg.block_table(device)
    pk, pv = kv.pool(cfg, k, v, table, device)
    lens = kv.seqlens(cfg.prior, device)
    return [(_LINEAR, (qn, kc, vc, kn, vn), {"cache_seqlens": lens, **kv.options(cfg)}),
            (_PAGED, (qn, pk, pv, kn, vn), {"cache_seqlens": lens, **kv.options(cfg, table=table)})]


def _kv_judge(cfg, label, args, kwargs, out_dtype):
    (truth, _, _), naive = kv.one_call_truth(cfg, *args, table=kwargs.get("block_table"))
    return _cpu, _policy(truth, naive, args[0].dtype)


def _kv_invoke(target, name, cfg, args, kwargs):
    """A paged call only on the targets that take a block table (``kvcache_paged``)."""
    if "block_table" in kwargs:
        try:
            require_features(target, "kvcache_paged")
        except Unsupported:
            return None
    return call_function(target, name, cfg, args, kwargs)


#: one differential check per record with ``compared`` (harness/protocol.py says how, in words)
CASES: dict[str, Case] = {
    "scaled_dot_product_attention": Case(attn_configs(), _sdpa_calls, _sdpa_judge),
    "sliding_window_attention": Case(window_configs(), _window_calls, _window_judge),
    "apply_rotary_embedding": Case(rope_configs().map(lambda c: replace(c, base=10000.0)), _rope_calls, _rope_judge),
    "alibi_bias": Case(alibi_configs(), _alibi_calls, _alibi_judge),
    "t5_relative_position_bucket": Case(t5_bucket_configs().map(_defaults), _bucket_calls, _exact, _bucket_exempt),
    "t5_relative_position_bias": Case(t5_bias_configs().map(_defaults), _bias_calls, _exact, _bias_exempt),
    "sinusoidal_position_embedding": Case(sinusoidal_configs(), _sinusoidal_calls, _sinusoidal_judge),
    "alibi_slopes": Case(alibi_configs(), _slopes_calls, _slopes_judge),
    "attention_with_kvcache": Case(kvc.ragged_configs().flatmap(
        lambda c: kvc.BLOCK_SIZES.map(lambda bs: replace(c, block_size=bs))), _kv_calls, _kv_judge,
        invoke=_kv_invoke, against={_PAGED: _LINEAR}),
    "attention_varlen": Case(varlen.CONFIGS, varlen.calls, varlen.judge),
    "LayerNorm": _norm_case("LayerNorm", layer_norm_math),
    "RMSNorm": _norm_case("RMSNorm", rms_norm_math),
    "distillation_loss": Case(distill_configs(), _distill_calls, _distill_judge),
    "build_inputs": Case(inputs_configs(), _inputs_calls, lambda *a: (_joined, None)),
    "build_model": Case(model_configs(), models.calls(lambda cfg: ()), models.judge("build_model"),
                        invoke=models.invoke),
    "bert_embeddings": Case(embedding_configs(), models.calls(lambda cfg: (
        cfg.vocab_size, cfg.hidden_size, cfg.max_positions)), models.judge("bert_embeddings"), invoke=models.invoke),
}

#: the shared names with no differential check, and why (the consistency section says so): each
#: record's ``not_compared`` (harness/protocol.py); ``CASES`` holds exactly the records' ``compared``
NOT_COMPARED = protocol.NOT_COMPARED


def sharing(targets, name: str) -> list:
    """The loaded targets that define ``name`` (a broken one is its own suites' failure)."""
    out = []
    for t in targets:
        try:
            t.lookup(name)
        except (Missing, BrokenTarget):
            continue
        out.append(t)
    return out


def _copied(x):
    return x.clone() if isinstance(x, torch.Tensor) else x


def call_function(target, name: str, cfg, args, kwargs):
    return impl(target, name)(*[_copied(a) for a in args], **{k: _copied(v) for k, v in kwargs.items()})


def outputs(targets, name: str, cfg, case: Case, calls) -> list[tuple[object, list]]:
    """[(target, [output per call])] for the targets whose every call returned."""
    invoke, got = case.invoke or call_function, []
    for t in targets:
        try:
            got.append((t, [invoke(t, name, cfg, args, kwargs) for _, args, kwargs in calls]))
        except ImplementationError:
            continue  # (raised, timed out, crashed: the target's own suites report it)
    return got


def least_precise(outs) -> torch.dtype:
    """Of the outputs' floating dtypes, the one with the largest eps (float32 if none floats)."""
    dtypes = [o.dtype for o in outs if isinstance(o, torch.Tensor) and o.dtype.is_floating_point]
    return max(dtypes, key=lambda d: torch.finfo(d).eps, default=torch.float32)


def compare(name: str, cfg, case: Case, calls, results) -> None:
    """Each target's outputs against the first target's (a call ``case.against`` names: every
    target's, the first's too, against the first target's output of the call named); AssertionError
    on a disagreement."""
    (first, base), rest = results[0], results[1:]
    labels = [label for label, _, _ in calls]
    for i, (label, args, kwargs) in enumerate(calls):
        j = labels.index((case.against or {}).get(label, label))
        view, allowed = case.judge(cfg, label, args, kwargs, least_precise([base[j]] + [o[i] for _, o in results]))
        a = view(base[j])
        exempt = case.exempt(cfg, label, args, kwargs) if case.exempt else None
        for other, outs in (results if j != i else rest):
            if outs[i] is None:  # (a call this target does not support)
                continue
            b = view(outs[i])
            if a.shape != b.shape:
                raise AssertionError(f"{first.spec} and {other.spec} give {name} ({label}) outputs of shapes "
                                     f"{tuple(a.shape)} and {tuple(b.shape)}; config {cfg.to_json()}")
            same_nan = torch.isnan(a) & torch.isnan(b)
            diff = (a - b).abs().masked_fill(same_nan | (a == b), 0).nan_to_num(float("inf"))
            if exempt is not None:
                diff = diff.masked_fill(exempt, 0)
            worst = float(diff.max()) if diff.numel() else 0.0
            if worst > (allowed or 0.0):
                idx = tuple(int(v) for v in (diff == diff.max()).nonzero()[0])
                bound = f"allowed {allowed:.3e} (twice the tolerance policy's allowance)" if allowed else \
                    "they must be equal"
                raise AssertionError(
                    f"{name} ({label}) at {idx}: {first.spec} {float(a[idx]):.6g}, {other.spec} {float(b[idx]):.6g}; "
                    f"max |difference| {worst:.3e}, {bound}; config {cfg.to_json()}")


@pytest.mark.parametrize("name", [*CASES, *NOT_COMPARED])
@given(data=st.data())
def test_outputs_agree(loaded_targets, name, data):
    """The targets that define ``name`` give the same outputs on the same inputs."""
    if len(loaded_targets) < 2:
        pytest.skip("a differential check needs two or more loaded --impl targets")
    targets = sharing(loaded_targets, name)
    if len(targets) < 2:
        pytest.skip(f"fewer than two targets define {name}")
    if name in NOT_COMPARED:
        pytest.skip(f"not compared: {NOT_COMPARED[name]}")
    case = CASES[name]
    cfg = data.draw(case.configs, label="cfg")
    supported = [t for t in targets if t.supports(cfg)]
    assume(len(supported) >= 2)  # (declared dtypes / sizes: compared where two take the config)
    calls = case.calls(cfg, supported[0].device)
    try:
        results = outputs(supported, name, cfg, case, calls)
    except models.NotComparable as exc:
        pytest.skip(f"not comparable: {exc}")
    assume(len(results) >= 2)
    compare(name, cfg, case, calls, results)


@pytest.mark.parametrize("name", [varlen.VS_DENSE])
@given(data=st.data())
def test_varlen_against_dense(loaded_targets, name, data):
    """Every target's ``attention_varlen`` and every target's SDPA run per sequence agree on the
    same packed inputs (``suites/consistency_varlen.py``)."""
    if len(loaded_targets) < 2:
        pytest.skip("a differential check needs two or more loaded --impl targets")
    packed, dense = sharing(loaded_targets, "attention_varlen"), sharing(loaded_targets, varlen.SDPA)
    if not packed or not dense:
        pytest.skip("needs a target with attention_varlen and one with scaled_dot_product_attention")
    cfg = data.draw(varlen.CONFIGS, label="cfg")
    packed, dense = [t for t in packed if t.supports(cfg)], [t for t in dense if t.supports(cfg)]
    calls = varlen.calls(cfg, (packed or dense)[0].device)
    results = varlen.packed_and_dense(packed, dense, cfg, *calls[0][1:])
    roles = {r.name for r, _ in results}
    assume("attention_varlen" in roles and len(roles) == 2)  # (one role's targets alone: the check above)
    compare(name, cfg, Case(None, varlen.calls, varlen.judge), calls, results)
