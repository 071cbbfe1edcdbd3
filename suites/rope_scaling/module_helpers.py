"""What the scaled rotary module's properties share: building and calling ``ScaledRotaryEmbedding``
through the kit, the float64 truth and the policy's naive yardstick of a call, and the two named
conventions measured on fresh instances (``rope_layout``: which dims pair; ``dynamic_update``: whether
the dynamic rule's base follows each call or grows until a short call resets it).

The truth of a call is ``reference/scaled_rope.py``'s: the frequencies and attention factor of
``rope_frequencies`` at the call's length (max position + 1; for the dynamic rule the length the
convention says), the first R dims rotated, the rest passed through. The yardstick is the same math as
a library does it: the plain frequencies computed in float32 (``1 / base^(arange(0, R, 2) / R)``, the
recipe every library uses, with the grown base for the dynamic rule) times the rule's float64 ratio,
the angles ``position * inv_freq`` in float32 (float64 for a float64 input), cos and sin multiplied by
the attention factor and rounded to the input dtype, the rotation in the input dtype.
"""
from __future__ import annotations

import torch

from harness.boundary import guard
from harness.reference.rope_scaling import dynamic_base, plain_frequencies, rope_frequencies
from harness.reference.rope import pair_indices, rotate
from harness.reference.scaled_rope import DYNAMIC_UPDATES, dynamic_length
from harness.spec import tolerance
from harness.spec.configs import DTYPES
from harness.suites.kit import ImplementationError, check_convention, expect_tensor, impl, is_module, move, record_label
from harness.suites.positions.helpers import layout_of
from harness.suites.rope_scaling.configs import ScaledRopeCallsConfig

MODULE = "ScaledRotaryEmbedding"


def build(target, cfg: ScaledRopeCallsConfig, device: str):
    """A fresh ``ScaledRotaryEmbedding(dim, base=base, scaling=scaling)`` (a handle in the worker) on ``device``."""
    mod = impl(target, MODULE)(cfg.dim, base=cfg.base, scaling=cfg.scaling())
    if not is_module(mod):
        raise ImplementationError(f"{cfg.constructed()} returned {type(mod).__name__}, expected an nn.Module")
    return move(target, mod, MODULE, device=device)


def forward(target, mod, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    out = guard.call(target.limit, mod, f"{MODULE}.forward", x, positions.to(x.device))
    return expect_tensor(out, f"{MODULE}.forward", tuple(x.shape), x.dtype, x.device)


def frequencies(cfg: ScaledRopeCallsConfig, length: int) -> tuple[torch.Tensor, float]:
    """The float64 (inv_freq, attention_factor) of a call of ``length`` (max position + 1)."""
    return rope_frequencies(cfg.dim, cfg.base, cfg.scaling(), length)


def naive_frequencies(cfg: ScaledRopeCallsConfig, length: int, inv: torch.Tensor) -> torch.Tensor:
    """The library recipe's float32 frequencies: plain ones in float32 (the grown base for the dynamic
    rule) times the rule's float64 ratio to plain."""
    R = 2 * inv.numel()
    base = cfg.base
    if cfg.rule == "dynamic":
        base = dynamic_base(R, cfg.base, cfg.factor, cfg.orig, length)
    plain32 = 1.0 / (base ** (torch.arange(0, R, 2, dtype=torch.int64).float() / R))
    return plain32 * (inv / plain_frequencies(R, base)).float()


def truth_and_naive(cfg: ScaledRopeCallsConfig, x: torch.Tensor, positions: torch.Tensor, length: int,
                    layout: str, inv: torch.Tensor, factor: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(float64 truth, naive in x's dtype) of rotating x at ``positions`` with the frequencies ``inv`` and
    attention factor ``factor`` of a call of ``length`` (``frequencies(cfg, length)``; ``layout`` pairs)."""
    x = x.cpu()
    pos = positions.cpu()
    truth = rotate(x, pos.double()[:, None] * inv, factor, layout)
    if x.dtype == torch.float64:
        angles = pos.double()[:, None] * inv
    else:
        angles = (pos.float()[:, None] * naive_frequencies(cfg, length, inv)).double()
    return truth, rotate(x, angles, factor, layout, compute_dtype=x.dtype)


#: float32 roundings a library's angle m * inv_freq may carry beyond the yardstick's (the rule's factor
#: applied as its own step, a reciprocal, a table built once and indexed): each off by at most u |angle|
ANGLE_ROUNDINGS = 4


def angle_dtype(dtype: torch.dtype) -> torch.dtype:
    """Where the angles are computed: float64 for a float64 input, else float32 (the recipe every
    library uses; float16/bfloat16 angles are a bug)."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def angle_terms(x: torch.Tensor, positions: torch.Tensor, layout: str, inv: torch.Tensor,
                factor: float) -> torch.Tensor:
    """The running-error magnitude of each output element from its angle (``tolerance.compare``'s
    ``terms``, in units of the angle dtype's u): a rotated element a cos t - b sin t moves by up to
    (|a| + |b|) |dt| when t is off by dt, and a float32 angle is off by a few u |t|: ``ANGLE_ROUNDINGS``
    x (|a| + |b|) x |t| x the attention factor. A maximum over a few elements of the naive yardstick's
    error can be luckily small; this term is not. Zero on the dims passed through."""
    R = 2 * inv.numel()
    angles = (positions.cpu().double()[:, None] * inv).abs()  # (L, R/2)
    first, second = pair_indices(R, layout)
    xa = x.cpu().double().abs()
    pair = xa[..., first] + xa[..., second]  # (..., L, R/2)
    terms = torch.zeros_like(xa)
    terms[..., first] = terms[..., second] = ANGLE_ROUNDINGS * factor * pair * angles
    return terms


def compare(out: torch.Tensor, cfg, x, positions, length: int, layout: str) -> tolerance.Comparison:
    inv, factor = frequencies(cfg, length)
    truth, naive = truth_and_naive(cfg, x, positions, length, layout, inv, factor)
    return tolerance.compare(out.cpu(), truth, naive, dtype=x.dtype,
                             terms=angle_terms(x, positions, layout, inv, factor), terms_dtype=angle_dtype(x.dtype))


def probe_dtype(target, prefer64: bool = False) -> torch.dtype:
    """float64 (``prefer64``) or float32 where the target supports it, else its first dtype."""
    supported = target.dtypes or tuple(DTYPES)
    for name in (("float64",) if prefer64 else ()) + ("float32",):
        if name in supported:
            return DTYPES[name]
    return DTYPES[supported[0]]


def measure_layout(target, cfg: ScaledRopeCallsConfig, device: str) -> tuple[str | None, str]:
    """Which of the first R dims a fresh instance rotates together: each basis vector e_j (batch item j)
    at positions 1 and ``max_position - 1`` in one call; the pass-through dims are the passthrough
    property's."""
    D, R = cfg.dim, cfg.rotary_dim
    eye = torch.eye(D, dtype=probe_dtype(target), device=device)[:, None, None, :].expand(D, 1, 2, D).contiguous()
    img = forward(target, build(target, cfg, device), eye, torch.tensor([1, cfg.max_position - 1])).double().cpu()
    support = (img[:, 0].abs() > 1e-9).any(dim=1)[:R, :R]  # (R, R): e_j's image has a k component
    return layout_of(target, support, f"positions 1 and {cfg.max_position - 1}, the first {R} of {D} dims")


def measure_dynamic_update(target, cfg: ScaledRopeCallsConfig, layout: str, device: str) -> tuple[list[str], str]:
    """Which of ``DYNAMIC_UPDATES`` the dynamic rule follows, whether the base follows each call
    (``per_call``) or stays grown (``grow_until_reset``): a fresh instance called at the longest
    position, then at a middle one (both past the original length), in float64 where the target has
    it. Returns (the conventions the second call matches: none, one, or both where they give the same
    numbers here, evidence)."""
    dtype = probe_dtype(target, prefer64=True)
    mod = build(target, cfg, device)
    long, mid = cfg.max_position, cfg.orig + (cfg.max_position - cfg.orig) // 3
    g = cfg.generator(salt=7)
    x = torch.randn(1, 1, 1, cfg.dim, generator=g).to(dtype).to(device)
    forward(target, mod, x, torch.tensor([long - 1]))
    out = forward(target, mod, x, torch.tensor([mid - 1])).cpu()
    pos = torch.tensor([mid - 1])
    matching = [u for u in DYNAMIC_UPDATES
                if compare(out, cfg, x, pos, dynamic_length([long, mid], cfg.orig, u), layout).ok]
    evidence = (f"\n  a fresh instance called at position {long - 1}, then at {mid - 1}: the second call "
                f"{'matches ' + ' and '.join(matching) if matching else 'matches neither'}")
    return matching, evidence


class Conventions:
    """The named conventions of one module configuration on one device, measured once per target
    (``target.measured``) and recorded as the test's labels (``update`` False: the layout only);
    ``lengths(cfg, index)`` the call lengths whose frequencies call ``index`` may use."""

    def __init__(self, target, cfg: ScaledRopeCallsConfig, device: str, update: bool = True):
        key = ("scaled_rope_module", cfg.dim, cfg.base, repr(cfg.scaling()), device)
        measured = target.measured
        if key + ("layout",) not in measured:
            measured[key + ("layout",)] = measure_layout(target, cfg, device)
        layout, evidence = measured[key + ("layout",)]
        record_label(target, check_convention("rope_layout", layout, target.conventions, evidence))
        self.layout, self.update = layout, None
        if cfg.rule == "dynamic" and update:  # (one call on a fresh instance: the conventions agree)
            if key + ("update",) not in measured:
                measured[key + ("update",)] = measure_dynamic_update(target, cfg, layout, device)
            matching, evidence = measured[key + ("update",)]
            if len(matching) < 2:  # (both: not told apart here, either accepted call by call)
                self.update = matching[0] if matching else None  # (None: no known convention, raised)
                record_label(target, check_convention("dynamic_update", self.update, target.conventions, evidence))

    def lengths(self, cfg: ScaledRopeCallsConfig, index: int) -> list[int]:
        """The lengths whose frequencies call ``index`` of ``cfg.calls`` may use, the expected first:
        its own for every rule but dynamic; the dynamic rule's per its convention (both where it
        was not told apart), Hugging Face's also the original one at exactly the original length."""
        own = cfg.lengths(index)
        if cfg.rule != "dynamic":
            return [own[-1]]
        updates = [self.update] if self.update else list(DYNAMIC_UPDATES)
        out = [dynamic_length(own, cfg.orig, u) for u in updates]
        if "grow_until_reset" in updates and own[-1] == cfg.orig:
            out.append(cfg.orig)  # reset at <= the original length instead of <: not told apart
        return list(dict.fromkeys(out))
