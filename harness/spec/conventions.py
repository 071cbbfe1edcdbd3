"""Named conventions: legitimate differences that are not bugs.

A target declares the conventions it follows in a module-level mapping::

    HARNESS_CONVENTIONS = {"causal_alignment": "bottom_right", "window_extent": "w+1"}

or on the command line (``--convention causal_alignment=bottom_right``). The
suites *measure* which convention the code follows and report it by name; a
property fails only when the measurement differs from what is declared (the
protocol's default when nothing is declared) or matches no known convention.
"""
from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType

DECLARATION_ATTR = "HARNESS_CONVENTIONS"


@dataclass(frozen=True)
class Convention:
    key: str
    default: str | None  # None: any known value is accepted and only reported
    values: dict[str, str]  # value -> who uses it

    def describe(self, value: str) -> str:
        return f"{value} ({self.values[value]})" if value in self.values else value


KNOWN: dict[str, Convention] = {c.key: c for c in [
    Convention("causal_alignment", "top_left", {
        "top_left": "torch SDPA: query i sees keys j <= i",
        "bottom_right": "FlashAttention >= 2.1, KV-cache decoding: query i sees keys j <= i + S - L",
    }),
    Convention("window_extent", "w", {
        "w": "the protocol: query i sees the w keys i-w < j <= i",
        "w+1": "FlashAttention window_size=(w, 0), attention-gym: i-w <= j <= i",
    }),
    Convention("fully_masked_rows", None, {
        "zeros": "torch SDPA on CPU since 2.5, FlashAttention",
        "nan": "the plain softmax over -inf",
        "uniform": "finite mask constants (e.g. finfo.min), Hugging Face eager attention",
    }),
    Convention("dropout_rng", "global", {
        "global": "torch SDPA, FlashAttention: the mask comes from torch's RNG, reproducible under "
                  "torch.manual_seed",
        "generator": "the kernel takes generator=torch.Generator: reproducible with a generator seeded "
                     "alike, whatever the global RNG state",
    }),
    Convention("backward_determinism", None, {
        "deterministic": "torch SDPA on the CPU, FlashAttention deterministic=True: the same inputs give "
                         "bitwise the same gradients",
        "nondeterministic": "FlashAttention's default deterministic=False (dQ accumulated by atomic adds in "
                            "the order key blocks finish), torch's CUDA SDPA backends: the last bits may differ "
                            "run to run",
    }),
    Convention("rope_layout", None, {
        "rotate_half": "GPT-NeoX / Llama: pairs (i, i + D/2)",
        "interleaved": "GPT-J / Meta: pairs (2i, 2i + 1)",
    }),
    Convention("dynamic_update", None, {
        "per_call": "the protocol's reference: each call's NTK base follows that call's own length "
                    "(max position + 1)",
        "grow_until_reset": "Hugging Face's dynamic_rope_update: the base of the longest length seen, back to "
                            "the original only when a call is shorter than original_max_position_embeddings",
    }),
    Convention("sinusoidal_layout", "interleaved", {
        "interleaved": "Vaswani et al.: PE(m, 2i) = sin, PE(m, 2i+1) = cos",
        "concatenated": "tensor2tensor / fairseq: [sin ..., cos ...]",
    }),
    Convention("rmsnorm_scale", "weight", {
        "weight": "torch.nn.RMSNorm, Llama: x * weight",
        "one_plus_weight": "Gemma: x * (1 + weight)",
    }),
    Convention("rmsnorm_eps", "finfo", {
        "finfo": "torch.nn.RMSNorm: eps=None means finfo(compute dtype).eps (float32 for half inputs since torch 2.6)",
        "fixed": "a fixed default eps such as 1e-6 (Llama, T5)",
    }),
    Convention("norm_placement", None, {
        "pre": "x + f(norm(x)): GPT-2, Llama and most modern decoders",
        "post": "norm(x + f(x)): Vaswani et al. 2017, BERT",
    }),
    Convention("mlm_selection", "independent", {
        "independent": "each non-special token selected with probability p: transformers' "
                       "DataCollatorForLanguageModeling",
        "fixed_count": "exactly round(n p) tokens per sequence (or batch): Google's create_pretraining_data.py",
    }),
]}


def declared_conventions(module: ModuleType | None) -> dict[str, str]:
    if module is None:
        return {}
    declared = getattr(module, DECLARATION_ATTR, None)
    return {str(k): str(v) for k, v in dict(declared or {}).items()}


def parse_cli(items: list[str] | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"--convention expects key=value, got {item!r}")
        out[key.strip()] = value.strip()
    return out


class ConventionMismatch(AssertionError):
    """The code follows a different convention than it declares. ``measured``: the convention the
    code follows (None: none known), so a report can hold targets' measurements side by side."""

    def __init__(self, message: str, measured: str | None = None):
        super().__init__(message)
        self.measured = measured

    def __reduce__(self):
        return type(self), (str(self), self.measured)


#: what a report shows for a behaviour that matches no known convention
UNNAMED = "(no known convention)"


def measured_of(label: str | None) -> str | None:
    """The measured value in a label ``check_convention`` returned (``convention:w+1``, possibly
    with a note after a space, e.g. ``convention:nondeterministic (max spread ...)``); None for
    any other label."""
    if not label or not label.startswith("convention:"):
        return None
    return label.removeprefix("convention:").split(" ", 1)[0]


def check_convention(key: str, measured: str | None, declared: dict[str, str], evidence: str = "") -> str:
    """Compare a measured convention with the declaration; return the outcome label.

    ``measured`` is None when the behaviour matches no known convention.
    Raises ``ConventionMismatch`` with a message that names both sides.
    """
    conv = KNOWN[key]
    expected = declared.get(key, conv.default)
    if measured is None:
        known = "; ".join(conv.describe(v) for v in conv.values)
        raise ConventionMismatch(
            f"{key}: the behaviour matches no known convention (known: {known}).{evidence}", UNNAMED)
    if expected is not None and measured != expected:
        source = "declared" if key in declared else "the protocol default"
        raise ConventionMismatch(
            f"{key}: the code follows {conv.describe(measured)}, but {source} is "
            f"{conv.describe(expected)}. This is a named convention, not necessarily a bug: "
            f"if it is intended, declare {DECLARATION_ATTR} = {{{key!r}: {measured!r}}} in the "
            f"target or pass --convention {key}={measured}.{evidence}", measured)
    return f"convention:{measured}"
