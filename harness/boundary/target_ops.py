"""Harness functions that run next to a target's objects (``harness.runner.on_target``).

When the target is isolated these run in its worker process, where its modules and functions
live; in-process (``--isolation none``) they run here. They are the harness's code: an
``AssertionError`` they raise is a property's verdict. Each one returns plain data (tensors,
numbers) or the target's objects (which come back as handles).
"""
from __future__ import annotations

from typing import Any, Callable

import torch

from harness.boundary import module_tensors


def _with_leaves(args: tuple, wrt: tuple[int, ...]) -> tuple[list, list[torch.Tensor]]:
    """``args`` as a list with ``args[i]`` (``i`` in ``wrt``) replaced by fresh leaves that require
    grad, and those leaves in ``wrt`` order."""
    args = list(args)
    for i in wrt:
        args[i] = args[i].detach().clone().requires_grad_(True)
    return args, [args[i] for i in wrt]


def vjp(fn: Callable, args: tuple, kwargs: dict, wrt: tuple[int, ...], grad_out=None):
    """``fn(*args, **kwargs)`` with ``args[i]`` (``i`` in ``wrt``) as fresh leaves that require
    grad, then backward with ``grad_out`` (None: a scalar output's 1).

    Returns ``(output detached, whether the output required grad, [grad of each wrt arg or
    None])``; an output that does not require grad returns no gradients."""
    args, leaves = _with_leaves(args, wrt)
    with torch.enable_grad():
        out = fn(*args, **kwargs)
        if not isinstance(out, torch.Tensor) or not out.requires_grad:
            return out, False, [None] * len(leaves)
        grads = torch.autograd.grad(out, leaves, grad_out, allow_unused=True)
    return out.detach(), True, list(grads)


def backward(fn: Callable, args: tuple, kwargs: dict, wrt: tuple[int, ...], grad_out: torch.Tensor,
             module: Any = None, params: tuple[str, ...] = (), seed: int | None = None):
    """The target's forward and backward: ``fn(*args, **kwargs)`` with ``args[i]`` (``i`` in
    ``wrt``) as fresh leaves, and ``module``'s tensors ``params`` (dotted paths from
    ``module_tensors``: "weight", "bias", "table.weight") made to require grad (a reshaped view of
    a parameter, as an adapter's ``.weight``: the parameter), then one backward with the upstream
    gradient ``grad_out`` (output-shaped). ``seed``: both run after ``manual_seed(seed)`` (one RNG
    stream: a dropout backward that draws a fresh mask draws past the forward's), and torch's RNG
    is left as it was.

    Returns ``(output detached, [grad of each wrt arg], {param: grad}, why)``; a gradient the
    backward did not reach is None. ``why`` is None, or why the target has no backward: its
    output has no grad_fn, or the backward raised NotImplementedError (or torch's "not
    implemented" RuntimeError). Any other exception in the backward is the target's error. A
    backward that writes into ``grad_out`` (dX computed in dY's storage) is an AssertionError, a
    verdict of every gradient property: autograd hands the same dY to every consumer of the output."""
    if seed is not None:
        return seeded(seed, backward, fn, args, kwargs, wrt, grad_out, module, params)
    args, leaves = _with_leaves(args, wrt)
    tensors, shapes = [], []
    for name in params:
        p = module_tensors.get(module, name)
        if not isinstance(p, torch.Tensor):
            raise AssertionError(f"the module has no tensor .{name} to differentiate (got {type(p).__name__})")
        shapes.append(p.shape)
        if not p.is_leaf and p._base is not None and p._base.is_leaf and p._base.numel() == p.numel():
            p = p._base  # .name is a reshaped view of the parameter (an adapter's): differentiate the parameter
        if not p.requires_grad and p.is_leaf:
            p.requires_grad_(True)
        tensors.append(p)
    none = [None] * len(leaves), {name: None for name in params}
    with torch.enable_grad():
        out = fn(*args, **kwargs)
        why = no_grad_fn(out)
        if why is not None:
            return out.detach() if isinstance(out, torch.Tensor) else out, *none, why
        kept = grad_out.clone() if isinstance(grad_out, torch.Tensor) else None
        try:
            grads = torch.autograd.grad(out, leaves + tensors, grad_out, allow_unused=True)
        except (NotImplementedError, RuntimeError) as exc:
            why = backward_missing(exc)
            if why is None:
                raise
            return out.detach(), *none, why
        finally:
            same = None if kept is None else (grad_out == kept) | (grad_out.isnan() & kept.isnan())
            written = same is not None and not bool(same.all())
            if written:
                changed = int((~same).sum())
                grad_out.copy_(kept)  # (the caller's tensor as it was: in-process, the harness's own)
        if written:
            raise AssertionError(
                f"the backward wrote into its incoming gradient (grad_output): {changed} of {kept.numel()} entries "
                f"changed; a kernel that reuses dY's storage for dX breaks any graph that uses that gradient "
                f"elsewhere (a residual branch, a second loss, gradient checkpointing)")
    pgrads = [None if d is None else d.reshape(shape) for d, shape in zip(grads[len(leaves):], shapes)]
    return out.detach(), list(grads[:len(leaves)]), dict(zip(params, pgrads)), None


class LinearSublayer(torch.nn.Module):
    """f(h) = h W^T, (..., dim) -> (..., dim): a sublayer the harness hands to a target's block
    (``norm_grad.residual_block``), built where the block runs so that dW is read there."""

    def __init__(self, weight: torch.Tensor):
        super().__init__()
        self.weight = torch.nn.Parameter(weight.clone())

    def forward(self, h):
        return h @ self.weight.transpose(0, 1).to(h.dtype)


def no_grad_fn(out: Any) -> str | None:
    """Why a forward's output ``out`` cannot be differentiated (not a tensor with a grad_fn), or
    None: the first half of "no backward" (the conformance gradient suites, the scaling bench)."""
    if isinstance(out, torch.Tensor) and out.grad_fn is not None:
        return None
    what = "requires grad but has no grad_fn" if getattr(out, "requires_grad", False) else "has no grad_fn"
    return f"the output {what}"


def backward_missing(exc: BaseException) -> str | None:
    """Why the exception a backward raised means it has none -- NotImplementedError, or torch's
    "... is not implemented" RuntimeError -- or None: any other exception is the code's error."""
    if isinstance(exc, NotImplementedError):
        return f"its backward raised NotImplementedError: {exc}"[:200]
    if isinstance(exc, RuntimeError) and "not implemented" in str(exc).lower():
        return f"its backward raised: {str(exc).splitlines()[0]}"[:200]
    return None


def assign_parameters(mod: torch.nn.Module, name: str, shape: Any, params: dict[str, torch.Tensor]) -> None:
    """Write float64 ``params`` (role -> value: "weight", "bias") into protocol class ``name``'s
    tensors of those roles (``module_tensors``), in place (as a model's checkpoint loading does),
    in the tensor's own dtype and device."""
    for role, value in params.items():
        try:
            module_tensors.write(mod, name, role, value)
        except AssertionError as exc:
            raise AssertionError(f"{name}({shape!r}, elementwise_affine=True): {exc}") from None


def manual_seed(seed: int) -> None:
    """``torch.manual_seed(seed)`` for the CPU and, when present, CUDA, without its hidden cost:
    on a machine without CUDA (or MTIA, XPU) ``torch.manual_seed`` still queues a lazy seeding
    call for each of them with a formatted stack trace (milliseconds under pytest's and
    Hypothesis' deep stacks, and a queue that grows with every call). Called once per example."""
    torch.random.default_generator.manual_seed(int(seed))
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(int(seed))


def builds(fn: Callable) -> Callable:
    """Marks ``fn`` as a BUILD: it constructs a target's module or model, which may import the
    target's libraries on its first call (transformers: seconds, and past the 20 s per-call limit on
    a loaded 2-core machine) and allocate a whole model (BERT-base: 110M parameters). A target's
    worker gives such a call the import limit (``--import-timeout``), not the per-call one."""
    fn.builds = True
    return fn


@builds
def seeded(seed: int, build: Callable, *args: Any, **kwargs: Any) -> Any:
    """``build(*args, **kwargs)`` with torch's global RNG seeded, and left as it was."""
    with torch.random.fork_rng(devices=[]):
        manual_seed(seed)
        return build(*args, **kwargs)


@builds
def count_parameters(build: Callable, *args: Any, **kwargs: Any) -> tuple[int, bool]:
    """``build(...)``'s parameter count, built on the meta device when it can be (no memory),
    else on the CPU; returns ``(count, built on meta)``."""
    try:
        with torch.device("meta"):
            model = build(*args, **kwargs)
        on_meta = True
    except Exception:  # noqa: BLE001 - a builder that cannot run on the meta device
        model, on_meta = build(*args, **kwargs), False
    return sum(p.numel() for p in model.parameters()), on_meta


def attribute_tensor(obj: Any, *path: str) -> torch.Tensor | None:
    """``obj.a.b...`` when it is a tensor (e.g. an embedding's ``.weight``), else None."""
    for attr in path:
        obj = getattr(obj, attr, None)
    return obj.detach() if isinstance(obj, torch.Tensor) else None


def state_of(mod: torch.nn.Module) -> dict[str, torch.Tensor]:
    """``mod``'s state dict (parameters and buffers), detached copies: what another target's module
    of the same model loads (the differential check of the models)."""
    return {k: v.detach().clone() for k, v in mod.state_dict().items()}


def load_state(mod: torch.nn.Module, state: dict[str, torch.Tensor]) -> str | None:
    """Load ``state`` into ``mod`` strictly (each tensor copied into the module's own dtype and
    device); None, or why it cannot: other keys or shapes mean another model, not another backend."""
    own = mod.state_dict()
    if set(own) != set(state):
        extra, missing = sorted(set(own) - set(state)), sorted(set(state) - set(own))
        return f"its state dict has {len(own)} entries, the first target's {len(state)} (only here: " \
               f"{extra[:3]}; only there: {missing[:3]})"
    for k, v in own.items():
        if tuple(v.shape) != tuple(state[k].shape):
            return f"{k} has shape {tuple(v.shape)}, the first target's {tuple(state[k].shape)}"
    mod.load_state_dict(state, strict=True)
    return None


def eval_forward(mod: torch.nn.Module, dtype: str | None, *args: Any) -> Any:
    """``mod(*args)`` in eval mode without grad; ``dtype`` "float64": on a float64 copy of the module
    with floating inputs in float64 (the yardstick), None: as it is."""
    import copy
    if dtype == "float64":
        mod = copy.deepcopy(mod).double()
        args = tuple(a.double() if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args)
    mod.eval()
    with torch.no_grad():
        return mod(*args)


def under_autocast(device_type: str, dtype: str, fn: Callable, *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` inside ``torch.autocast(device_type, dtype)``, as training code
    calls a kernel (the autocast context must be entered where the target runs)."""
    with torch.autocast(device_type, dtype=getattr(torch, dtype)):
        return fn(*args, **kwargs)


def call_each(fn: Callable, arg_tuples: list, kwargs: dict) -> list:
    """``[fn(*args, **kwargs) for args in arg_tuples]``: a statistical property's loop of calls
    in one request (one round trip for many calls; a generator among ``kwargs`` is one object,
    drawn on by every call in turn)."""
    return [fn(*args, **kwargs) for args in arg_tuples]


def gradcheck(fn: Callable, args: tuple, kwargs: dict, wrt: tuple[int, ...], eps: float, atol: float,
              rtol: float, *, fast_mode: bool = False) -> str | None:
    """``torch.autograd.gradcheck`` of ``fn(*args, **kwargs)`` with respect to ``args[i]`` (``i``
    in ``wrt``, float64): the Jacobian its backward gives against central differences of its
    forward, elementwise ``|numerical - analytical| <= atol + rtol |numerical|``. Returns None when
    they agree, else gradcheck's first line and the worst element. Two backward passes may
    differ by ``atol`` (nondeterminism is ``backward_determinism``'s business, not this check's).
    ``fast_mode``: gradcheck's fast mode, the Jacobian projected on random vectors (a few calls of
    ``fn`` instead of two per input element: an interpreted Triton kernel's smoke tier)."""
    from torch.autograd.gradcheck import GradcheckError
    leaves = [args[i].detach().clone().requires_grad_(True) for i in wrt]

    def f(*xs):
        a = list(args)
        for i, x in zip(wrt, xs):
            a[i] = x
        return fn(*a, **kwargs)

    try:
        with torch.enable_grad():
            torch.autograd.gradcheck(f, tuple(leaves), eps=eps, atol=atol, rtol=rtol, nondet_tol=atol,
                                     check_undefined_grad=False, fast_mode=fast_mode)
    except GradcheckError as exc:
        return f"{str(exc).splitlines()[0].rstrip(',')}; {_worst_element(f, leaves, eps, rtol)}"
    return None


def module_gradcheck(mod: torch.nn.Module, x: torch.Tensor, params: tuple[str, ...], eps: float, atol: float,
                     rtol: float, *, fast_mode: bool = False) -> str | None:
    """``gradcheck`` of ``mod(x)`` with respect to x and ``mod``'s tensors ``params`` (dotted paths
    from ``module_tensors``, e.g. "weight", "bias"; float64), each swapped in with
    ``torch.func.functional_call``: inputs 0, 1, ... are x, then ``params`` in order."""
    tensors = [module_tensors.get(mod, name) for name in params]

    def fn(x, *ps):
        return torch.func.functional_call(mod, dict(zip(params, ps)), (x,))
    return gradcheck(fn, (x, *(t.detach() for t in tensors)), {}, tuple(range(1 + len(params))), eps, atol, rtol,
                     fast_mode=fast_mode)


def _worst_element(f: Callable, leaves: list, eps: float, rtol: float) -> str:
    """The Jacobian element furthest outside ``rtol``: input n, output index, input index, both values."""
    worst = (-1.0, "")
    for n, x in enumerate(leaves):
        def one(t, n=n):
            return f(*[t if m == n else y for m, y in enumerate(leaves)])
        with torch.enable_grad():
            ana = torch.autograd.functional.jacobian(one, x).reshape(-1, x.numel())
        num = torch.empty_like(ana)
        for e in range(x.numel()):
            step = torch.zeros_like(x).reshape(-1)
            step[e] = eps
            step = step.reshape(x.shape)
            with torch.no_grad():
                num[:, e] = ((one(x + step) - one(x - step)) / (2 * eps)).reshape(-1)
        gap = (num - ana).abs() - rtol * num.abs()
        o, i = divmod(int(gap.argmax()), x.numel())
        if float(gap.max()) > worst[0]:
            out_shape = one(x).shape
            where = (tuple(torch.unravel_index(torch.tensor(o), out_shape)), tuple(torch.unravel_index(torch.tensor(i), x.shape)))
            worst = (float(gap.max()), f"worst: d output{tuple(int(a) for a in where[0])} / d input {n}"
                                       f"{tuple(int(a) for a in where[1])}: numerical {float(num[o, i]):.10g}, "
                                       f"analytical {float(ana[o, i]):.10g}")
    return worst[1]
