"""Configurations for the BERT-family suites (MLM masking, distillation, span corruption, models).

As in ``harness.spec.configs``: the suites draw a configuration (sizes, rates, dtype,
seed) and rebuild every tensor from the seed, so a shrunk counterexample is a
handful of numbers that ``python -m harness repro`` replays exactly. The
statistical properties draw few configurations with large samples each; their
seeds are drawn like any other field, so CI (the derandomized ``ci`` profile)
is deterministic while the stated bounds hold for any seed.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from hypothesis import strategies as st

from harness.suites.strategies import SEED
from harness.spec.configs import Config, register

#: special token ids in the MLM batches; ordinary words are FIRST_WORD .. vocab_size - 1
PAD, CLS, SEP, FIRST_WORD = 0, 1, 2, 4


@register
@dataclass(frozen=True)
class MLMConfig(Config):
    """input_ids (rows, length): ``[CLS] A [SEP] B [SEP] [PAD]...`` per row (the last [SEP] in the
    last quarter of the row), words uniform over
    [FIRST_WORD, vocab_size) without the mask id. ``mlm_probability`` None = not passed (default).
    ``extra_special`` marks that fraction of the words special too (added special tokens)."""

    rows: int
    length: int
    vocab_size: int
    mask_token_id: int
    mlm_probability: float | None
    extra_special: float
    seed: int

    @property
    def p(self) -> float:
        return 0.15 if self.mlm_probability is None else self.mlm_probability

    def kwargs(self) -> dict:
        kw = dict(vocab_size=self.vocab_size, mask_token_id=self.mask_token_id)
        if self.mlm_probability is not None:
            kw["mlm_probability"] = self.mlm_probability
        return kw

    def batch(self, salt: int = 0, rows: int | None = None, length: int | None = None):
        """(input_ids int64, special_tokens_mask bool), both (rows, length), on the CPU."""
        g = self.generator(salt)
        R, L = rows or self.rows, length or self.length
        pos = torch.arange(L)
        end = torch.randint(max(1, 3 * L // 4), L, (R, 1), generator=g) if L > 2 else torch.full((R, 1), L - 1)
        mid = (torch.rand((R, 1), generator=g) * (end - 1)).long() + 1  # in [1, end - 1]
        ids = torch.randint(FIRST_WORD, self.vocab_size, (R, L), generator=g)
        ids[ids == self.mask_token_id] = FIRST_WORD if self.mask_token_id != FIRST_WORD else FIRST_WORD + 1
        special = (pos == 0) | (pos == end) | ((pos == mid) & (mid < end)) | (pos > end)
        ids = torch.where(pos == 0, CLS, torch.where(pos > end, PAD, torch.where(special, SEP, ids)))
        if self.extra_special > 0:
            special |= torch.rand((R, L), generator=g) < self.extra_special
        return ids, special


@st.composite
def mlm_configs(draw, size: str = "small", extra_special=st.sampled_from([0.0, 0.05]),
                rates=(None, None, 0.15, 0.1, 0.3, 0.5)) -> MLMConfig:
    """``small``: up to 8 x 64 tokens; ``medium``: 64 x 128 (about 7000 words, 1000 special
    positions); ``large``: 2048 x 512 (0.85-0.9 M words) for the statistical properties.
    Medium and large vocabularies have at least 1000 ids: a random replacement equals the original
    or [MASK] with probability about 1/vocab_size (at most 1e-3 there), allowed for in the bounds."""
    if size == "large":
        rows, length = 2048, 512
        vocab = draw(st.sampled_from([1000, 30522, 50265]))
    elif size == "medium":
        rows, length = 64, 128
        vocab = draw(st.sampled_from([1000, 30522]))
    else:
        rows, length = draw(st.integers(1, 8)), draw(st.integers(1, 64))
        vocab = draw(st.sampled_from([8, 100, 1000, 30522]))
    mask_id = draw(st.sampled_from(sorted({3, min(103, vocab - 1), vocab - 1})))
    p = draw(st.sampled_from(rates))
    return MLMConfig(rows=rows, length=length, vocab_size=vocab, mask_token_id=mask_id, mlm_probability=p,
                     extra_special=draw(extra_special), seed=draw(SEED))


@register
@dataclass(frozen=True)
class DistillConfig(Config):
    """student/teacher logits (*lead, classes); logits ~ N(0, logit_scale^2), the teacher's
    sharpened by ``teacher_sharpness``."""

    lead: tuple[int, ...]
    classes: int
    temperature: float
    logit_scale: float
    dtype: str
    seed: int

    @property
    def rows(self) -> int:
        return math.prod(self.lead)

    def logits(self, device="cpu", salt: int = 0, teacher_sharpness: float = 1.0):
        """(student, teacher) in the config's dtype."""
        g = self.generator(salt)
        shape = (*self.lead, self.classes)
        s = torch.randn(shape, generator=g, dtype=torch.float64) * self.logit_scale
        t = torch.randn(shape, generator=g, dtype=torch.float64) * self.logit_scale * teacher_sharpness
        return s.to(self.torch_dtype).to(device), t.to(self.torch_dtype).to(device)


_LEAD = st.one_of(st.tuples(st.integers(1, 6)), st.tuples(st.integers(1, 3), st.integers(1, 5)))


@st.composite
def distill_configs(draw, dtypes=st.sampled_from(["float32", "float64", "float16", "bfloat16"]),
                    lead=_LEAD, min_rows: int = 1, min_classes: int = 2, temperature=None) -> DistillConfig:
    shape = draw(lead)
    if math.prod(shape) < min_rows:
        shape = (*shape[:-1], shape[-1] + min_rows)
    temp = draw(temperature if temperature is not None else st.sampled_from([1.0, 2.0, 0.5, 4.0, 8.0]))
    classes = draw(st.one_of(st.integers(min_classes, 12), st.sampled_from([100, 1000])))
    return DistillConfig(lead=shape, classes=classes,
                         temperature=temp, logit_scale=draw(st.sampled_from([1.0, 3.0, 10.0, 30.0])),
                         dtype=draw(dtypes), seed=draw(SEED))


def wide_dtypes():
    return st.sampled_from(["float32", "float64"])


@register
@dataclass(frozen=True)
class SpanConfig(Config):
    """tokens (length,) uniform over [0, vocab_size - sentinels); sentinel_ids T5-like: vocab_size - 1,
    vocab_size - 2, ... (enough for every possible span). None = the parameter is not passed."""

    length: int
    noise_density: float | None
    mean_span_length: float | None
    vocab_size: int
    seed: int
    calls: int = 1

    @property
    def rho(self) -> float:
        return 0.15 if self.noise_density is None else self.noise_density

    @property
    def mu(self) -> float:
        return 3.0 if self.mean_span_length is None else self.mean_span_length

    @property
    def sentinel_ids(self) -> list[int]:
        return list(range(self.vocab_size - 1, self.vocab_size - 2 - self.length, -1))

    def kwargs(self) -> dict:
        kw: dict = {"sentinel_ids": self.sentinel_ids}
        if self.noise_density is not None:
            kw["noise_density"] = self.noise_density
        if self.mean_span_length is not None:
            kw["mean_span_length"] = self.mean_span_length
        return kw

    def tokens(self, salt: int = 0) -> torch.Tensor:
        hi = self.vocab_size - len(self.sentinel_ids)
        return torch.randint(0, hi, (self.length,), generator=self.generator(salt))


@st.composite
def span_configs(draw, statistical: bool = False) -> SpanConfig:
    """``statistical``: lengths where length * density and length * density / mean_span_length are
    integers (T5's rounding then makes no bias) and ``calls`` sequences per example."""
    if statistical:
        rho = draw(st.sampled_from([None, 0.15, 0.1, 0.25, 0.5]))
        mu = draw(st.sampled_from([None, 3.0, 2.0, 5.0]))
        r, m = (0.15 if rho is None else rho), (3 if mu is None else int(mu))
        unit = 20 * m  # 20 * rho is an integer for every rho above
        length = unit * max(1, round(120 / unit))
        assert abs(length * r - round(length * r)) < 1e-9 and abs(length * r / m - round(length * r / m)) < 1e-9
        return SpanConfig(length=length, noise_density=rho, mean_span_length=mu, vocab_size=32128,
                          seed=draw(SEED), calls=6000)
    length = draw(st.one_of(st.integers(2, 40), st.sampled_from([64, 100, 257])))
    rho = draw(st.one_of(st.none(), st.sampled_from([0.15, 0.05, 0.3, 0.5, 0.8])))
    mu = draw(st.one_of(st.none(), st.sampled_from([1.0, 2.0, 3.0, 2.5, 8.0])))
    return SpanConfig(length=length, noise_density=rho, mean_span_length=mu,
                      vocab_size=draw(st.sampled_from([32128, 1000])), seed=draw(SEED))


@register
@dataclass(frozen=True)
class ModelConfig(Config):
    """A (batch, length, embed_dim) probe of the target's model; ``size`` for the BERT configs."""

    batch: int
    length: int
    seed: int
    size: str = "base"


def model_configs(sizes=("base",)):
    return st.builds(ModelConfig, batch=st.integers(1, 2), length=st.integers(2, 7), seed=SEED,
                     size=st.sampled_from(list(sizes)))


@register
@dataclass(frozen=True)
class InputsConfig(Config):
    """Sentence A (len_a words) and optionally B (len_b; 0 = single sentence), words >= 1000."""

    len_a: int
    len_b: int
    seed: int

    def sentences(self) -> tuple[list[int], list[int] | None]:
        g = self.generator()
        a = torch.randint(1000, 30000, (self.len_a,), generator=g).tolist()
        b = torch.randint(1000, 30000, (self.len_b,), generator=g).tolist() if self.len_b else None
        return a, b


def inputs_configs():
    return st.builds(InputsConfig, len_a=st.integers(0, 12), len_b=st.integers(0, 12), seed=SEED)


@register
@dataclass(frozen=True)
class EmbeddingConfig(Config):
    """A BERT input embedding (vocab, hidden, positions, 2 segments) probed on (batch, length)."""

    vocab_size: int
    hidden_size: int
    max_positions: int
    batch: int
    length: int
    seed: int


@st.composite
def embedding_configs(draw) -> EmbeddingConfig:
    positions = draw(st.sampled_from([8, 16, 512]))
    return EmbeddingConfig(vocab_size=draw(st.sampled_from([50, 1000])), hidden_size=draw(st.sampled_from([4, 16, 32])),
                           max_positions=positions, batch=draw(st.integers(1, 3)),
                           length=draw(st.integers(2, min(positions, 20))), seed=draw(SEED))


@register
@dataclass(frozen=True)
class NSPConfig(Config):
    """A corpus of ``documents`` documents with 2..``max_sentences`` sentences each; sentence k of
    document d is ``[SENTENCE_BASE + 1000 * d + k, ...]`` (decodable), ``pairs`` pairs requested."""

    documents: int
    max_sentences: int
    pairs: int
    seed: int

    def corpus(self) -> list[list[list[int]]]:
        g = self.generator()
        counts = torch.randint(2, self.max_sentences + 1, (self.documents,), generator=g).tolist()
        lengths = torch.randint(1, 6, (sum(counts),), generator=g).tolist()
        docs, i = [], 0
        for d, n in enumerate(counts):
            doc = []
            for k in range(n):
                doc.append([SENTENCE_BASE + 1000 * d + k] + [7] * (lengths[i] - 1))
                i += 1
            docs.append(doc)
        return docs


SENTENCE_BASE = 1_000_000


def nsp_configs():
    return st.builds(NSPConfig, documents=st.sampled_from([2, 3, 10, 200]), max_sentences=st.sampled_from([2, 5, 30]),
                     pairs=st.just(100_000), seed=SEED)


# -- statistical bounds the suites state ------------------------------------------------------
#: false-failure budget of one statistical test (all its examples and rates together)
DELTA = 1e-6


def hoeffding_radius(n: int, delta: float) -> float:
    """Two-sided Hoeffding: for n i.i.d. draws in [0, 1], P(|mean - E| >= r) <= delta."""
    return math.sqrt(math.log(2.0 / delta) / (2.0 * max(n, 1)))


def empirical_bernstein_radius(x: torch.Tensor, delta: float, value_range: float = 1.0) -> float:
    """Two-sided empirical Bernstein (Maurer & Pontil 2009, Thm 4, applied to x and -x with delta/2
    each): for n i.i.d. draws in an interval of length ``value_range``, with probability >= 1 - delta
    |mean - E| <= sqrt(2 V ln(4/delta) / n) + 7 R ln(4/delta) / (3 (n - 1)), V the sample variance.
    Tight when the draws vary little (T5's fixed per-sequence counts), unlike Hoeffding."""
    n = x.numel()
    v = float(x.double().var()) if n > 1 else 0.0
    log = math.log(4.0 / delta)
    return math.sqrt(2.0 * v * log / n) + 7.0 * value_range * log / (3.0 * max(n - 1, 1))
