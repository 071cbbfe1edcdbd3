"""Helpers the position-encoding suites share: output checks for protocol functions
that take sizes rather than tensors (so have no input dtype/device to mirror),
the RoPE call and the probe that finds which dims RoPE rotates together."""
from __future__ import annotations

import torch

from harness.spec import tolerance
from harness.spec.configs import DTYPES
from harness.suites.positions.configs import RopeConfig
from harness.suites.kit import ImplementationError, expect_tensor, resolved, submit
from harness.reference.rope import LAYOUTS, pair_indices, rope_math

ROPE = "apply_rotary_embedding"


def expect_floating(out, name: str, shape: tuple[int, ...]) -> torch.Tensor:
    """A floating tensor of this shape (any float dtype, any device); returned on the CPU."""
    if not isinstance(out, torch.Tensor):
        raise ImplementationError(f"{name} returned {type(out).__name__}, expected a Tensor")
    if tuple(out.shape) != tuple(shape):
        raise ImplementationError(f"{name} returned shape {tuple(out.shape)}, expected {tuple(shape)}")
    if not out.dtype.is_floating_point:
        raise ImplementationError(f"{name} returned dtype {out.dtype}, expected a floating dtype")
    return out.detach().cpu()


# ---------------------------------------------------------------- RoPE

def call_rope(target, x: torch.Tensor, positions: torch.Tensor, base: float) -> torch.Tensor:
    """The target's RoPE; output shape/dtype/device checked (same as x)."""
    return submit_rope(target, x, positions, base).result()


def submit_rope(target, x: torch.Tensor, positions: torch.Tensor, base: float):
    """``call_rope`` as a ``Pending`` (``submit``): ``rope_agree`` reads it after it computed the
    reference, which a worker overlaps with the target's call."""
    return submit(target, ROPE, x, positions, base=base).then(
        lambda out: expect_tensor(out, ROPE, tuple(x.shape), x.dtype, x.device))


def rope_truth(x, positions, base, layout) -> torch.Tensor:
    return rope_math(x.cpu(), positions.cpu(), base, layout)


def rope_naive(x, positions, base, layout) -> torch.Tensor:
    """The policy's yardstick: the rotation in the input dtype, cos/sin rounded to it, and the
    angles m * theta in the input dtype's opmath: float64 for float64, else float32 (the
    recipe every library uses; float16/bfloat16 angles are the bug, not the yardstick)."""
    angle_dtype = torch.float64 if x.dtype == torch.float64 else torch.float32
    return rope_math(x.cpu(), positions.cpu(), base, layout, compute_dtype=x.dtype,
                     angle_dtype=angle_dtype)


def rope_agree(out, x, positions, base, layout, what: str) -> tolerance.Comparison:
    """``out`` (or a ``submit_rope``) equals the rotation under the tolerance policy."""
    ref, nai = rope_truth(x, positions, base, layout), rope_naive(x, positions, base, layout)
    return tolerance.assert_close(resolved(out), ref, nai, dtype=x.dtype, what=what)


#: positions the pairing probe rotates the basis vectors to: sin(theta) is far from 0 at one
#: of them for every theta the configs draw (theta >= 1e6^-1 at 1, and >= 1e-3 at 1000)
PROBE_POSITIONS = (1, 1000)


def rope_images(target, D: int, base: float, dtype: torch.dtype, positions=PROBE_POSITIONS) -> torch.Tensor:
    """(P, D, D) float64: [p, j] is R(positions[p]) e_j, the image of basis vector j."""
    P = len(positions)
    x = torch.eye(D, dtype=dtype, device=target.device).repeat(P, 1)[None, None]  # (1, 1, P*D, D)
    pos = torch.tensor(positions, device=target.device).repeat_interleave(D)  # (P*D,)
    return call_rope(target, x, pos, base).double().cpu().reshape(P, D, D)


def measure_rope_layout(target, D: int, base: float) -> tuple[str | None, str]:
    """Which dims the target rotates together, found by rotating each basis vector (in float32
    unless the target declares dtypes without it; exact zeros stay zeros in any dtype).

    Returns (layout or None, evidence for messages). Each e_j must map into the span of
    e_j and exactly one partner e_k, and k's partner must be j.
    """
    supported = target.dtypes or ("float32",)  # a target may declare e.g. half precision only
    img = rope_images(target, D, base, DTYPES["float32" if "float32" in supported else supported[0]])
    support = (img.abs() > 1e-9).any(dim=0)  # (D, D): support[j, k] = e_j's image has a k component
    return layout_of(target, support, f"positions {PROBE_POSITIONS}")


def layout_of(target, support: torch.Tensor, probe: str) -> tuple[str | None, str]:
    """The layout whose pairs ``support`` (D, D) shows (``support[j, k]``: e_j's image has a k
    component), and the evidence for messages (``probe``: how the images were taken). Each e_j must
    map into the span of e_j and exactly one partner e_k, and k's partner must be j; where both
    layouts fit (D = 2) the declared one."""
    D = support.shape[0]
    partners = {j: [k for k in support[j].nonzero().flatten().tolist() if k != j] for j in range(D)}
    consistent = all(len(ks) == 1 and partners[ks[0]] == [j] for j, ks in partners.items())
    shown = ", ".join(f"{j}->{ks}" for j, ks in list(partners.items())[:12])
    evidence = (f"\n  dims each basis vector e_j is rotated into (D={D}, {probe}): "
                f"{shown}{' ...' if D > 12 else ''}")
    if not consistent:
        return None, evidence
    pairs = sorted((j, ks[0]) for j, ks in partners.items() if j < ks[0])
    matching = [lay for lay in LAYOUTS if pairs == sorted(zip(*(t.tolist() for t in pair_indices(D, lay))))]
    preferred = target.conventions.get("rope_layout")  # D = 2: both layouts are the pair (0, 1)
    return (preferred if preferred in matching else matching[0] if matching else None), evidence


def declared_or(target, measured: str | None) -> str:
    """The layout to compare against: the measured one, else the declared one, else interleaved."""
    return measured or target.conventions.get("rope_layout") or "interleaved"


def scores(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """<q_m, k_n> in float64: (B, H, Lq, Lk)."""
    return q.double().cpu() @ k.double().cpu().transpose(-2, -1)


def score_allowance(cfg: RopeConfig, q, k, pq, pk, layout: str) -> float:
    """What the tolerance policy allows for the scores of RoPE'd q (at pq) and k (at pk)."""
    truth = scores(rope_truth(q, pq, cfg.base, layout), rope_truth(k, pk, cfg.base, layout))
    naive = scores(rope_naive(q, pq, cfg.base, layout), rope_naive(k, pk, cfg.base, layout))
    return tolerance.allowance(truth, naive, dtype=q.dtype)


def module_devices(target) -> list[str]:
    """Where a stateful module under test is called: the target's device, and the CPU when that
    is another one (``--device cuda``): a module on an accelerator is also moved to the CPU and
    back; one under test on the CPU stays there (it may be a CPU-only kernel)."""
    return [target.device] + (["cpu"] if torch.device(target.device).type != "cpu" else [])
