"""Planted bug (a convention, undeclared): the kernel draws its dropout mask from the
``generator=`` its caller passes, not from torch's global RNG, and does not say so.

Real pattern: a kernel ported from a codebase that threads explicit generators; training code that
relies on ``torch.manual_seed`` for reproducibility silently loses it. Not a bug if intended: the
failure names the convention and the declaration that accepts it.
Caught by: attention.dropout_seeded (a convention mismatch naming dropout_rng = generator).
Message: convention mismatch
Message: dropout_rng: the code follows generator
Message: HARNESS_CONVENTIONS
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import dropout_generator_declared as declared  # noqa: E402

scaled_dot_product_attention = declared.GeneratorDropout().scaled_dot_product_attention
