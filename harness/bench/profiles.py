"""Benchmark profiles: sizes and budgets per suite for ``--profile cpu|gpu|tiny``.

cpu   a 2-core laptop/CI box: every suite in about 2-3 minutes. Scaling sweeps
      n = 256..4096 at sqrt(2) steps (9 sizes: the upper-half fit has 5 points)
      with 4 heads of 64 so the n^2 work dominates from n ~ 1k; blocks >= 20 ms.
      It times the forward and the backward; the backward sweeps the powers of two
      of that range (5 sizes, the fit 3), which keeps its cost near the forward's
      (forward+backward on a CPU is about their sum: ``--passes fwd,bwd,fwd_bwd``).
gpu   one large GPU: n = 1k..128k (memory-efficient kernels reach >= 64k; the
      naive math runs out of memory at some size, which is recorded as "oom").
      A run-level time budget of 225 s (``time_budget_s``; ``--time-budget-s`` overrides,
      0 = none): points that would start later are recorded as skipped, so the whole
      ``bench`` stays under ~4.5 minutes even if a kernel is far slower than expected
      (notes/GPU_PROFILE_ESTIMATE.md: about 1.5 minutes expected on an H200).
tiny  unit tests: seconds in all.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace


@dataclass(frozen=True)
class Scaling:
    sizes: tuple[int, ...]
    batch: int = 1
    heads: int = 4
    head_dim: int = 64
    window: int = 128
    dtype: str = "float32"
    causal: bool = False          # dense cases; the window cases are causal by definition
    min_block_s: float = 0.02     # CPU timer: calls per block so a block takes >= this
    min_run_s: float = 0.15
    min_blocks: int = 5
    max_run_s: float = 2.0        # per point (after the calibration block)
    rep_ms: float = 100.0         # CUDA timer
    warmup_ms: float = 25.0
    max_call_s: float = 1.0       # a case whose call takes longer skips its larger sizes
    lstm_max_n: int | None = None
    #: what each case is timed as (harness.verdicts.runfolder.PASSES): forward, backward, forward+backward
    passes: tuple[str, ...] = ("fwd", "bwd", "fwd_bwd")
    #: the sizes of the backward passes (None: ``sizes``); ``--sizes`` sets both
    backward_sizes: tuple[int, ...] | None = None
    #: CPU sweep: a size too noisy for the gate's stated slowdown takes more blocks, up to this
    #: many, while the run's ``spread_budget_s`` seconds last (``harness.bench.sweep``; 0: never)
    spread_max_blocks: int = 15
    spread_budget_s: float = 0.0

    def sizes_of(self, pass_: str) -> tuple[int, ...]:
        """The sizes swept in ``pass_``."""
        return self.sizes if pass_ == "fwd" or self.backward_sizes is None else self.backward_sizes


@dataclass(frozen=True)
class ReceptiveField:
    depths: tuple[int, ...] = tuple(range(1, 9))
    window: int = 5
    n: int = 64
    dim: int = 32
    heads: int = 4
    kv_heads: int = 2


@dataclass(frozen=True)
class KVCache:
    heads: int = 8
    head_dim: int = 32
    layers: int = 2
    batch: int = 2
    prompt: int = 16
    new_tokens: int = 48
    window: int = 24              # rolling_window case (Mistral sliding_window)
    dtype: str = "float32"
    intermediate: int = 512
    vocab: int = 512
    # the paged case (harness.bench.kv_cache_paged): a batch of items at most paged_max_seq long,
    # filled to ``fill`` on average, in pages of block_size
    paged_batch: int = 8
    paged_max_seq: int = 512
    block_size: int = 16
    fill: float = 0.25


@dataclass(frozen=True)
class Packing:
    """The packed-vs-padded point (harness.bench.packing): ``docs`` documents, log-normal lengths."""
    docs: int = 8
    median: int = 48
    sigma: float = 0.8
    max_len: int = 256
    heads: int = 2
    head_dim: int = 32
    dtype: str = "float32"
    seed: int = 0


@dataclass(frozen=True)
class TimerCheck:
    #: CPU: an n x n x n matmul, big enough (~50 ms on one core) that both timers time single
    #: calls -- their medians then agree even on a shared machine; CUDA: SDPA at n = 8 * size
    size: int = 1024
    dtype: str = "float32"
    rounds: int = 5
    min_run_s: float = 0.3
    tolerance: float = 0.05       # +-5 % on CPU, +-3 % on CUDA (set by the profile)


@dataclass(frozen=True)
class Profile:
    name: str
    scaling: Scaling
    receptive_field: ReceptiveField = field(default_factory=ReceptiveField)
    kv_cache: KVCache = field(default_factory=KVCache)
    timer: TimerCheck = field(default_factory=TimerCheck)
    #: torch CPU threads (None: torch's default). The cpu profile times on 1 thread, as
    #: torch.utils.benchmark.Timer does by default: comparable across machines and not
    #: stalled by OpenMP barriers when another process shares the cores.
    threads: int | None = None
    #: side of the square matmul that measures env.json's peak TFLOP/s (None: 1024 CPU, 8192 CUDA)
    peak_size: int | None = None
    #: seconds after which ``bench`` starts no new point (None: no budget)
    time_budget_s: float | None = None
    #: CPU peak memory (RSS high-water mark) moves with the heap's state from call to call (the
    #: banded kernel at n = 4096: 58-90 MiB in one process): it is measured up to ``mem_repeats``
    #: times per point, while the repeats take under ``mem_budget_s``, and the row records the
    #: median and the min/max the baseline gate derives its allowance from. CUDA: one call (exact).
    #: 3 s: the reference's float64 attention at n = 1456 (0.3 s a call on a busy VM) still gets
    #: repeats, and it reads one score matrix more or less from call to call.
    mem_repeats: int = 5
    mem_budget_s: float = 3.0
    #: the packed-vs-padded point (harness.bench.packing; last: the profiles pass the suites' sizes by position)
    packing: Packing = field(default_factory=Packing)


def _sqrt2_steps(lo: int, hi: int) -> tuple[int, ...]:
    out, k = [], 0
    while True:
        n = int(round(lo * 2 ** (k / 2) / 16) * 16)
        if n > hi:
            break
        out.append(n)
        k += 1
    return tuple(out)


PROFILES: dict[str, Profile] = {
    "cpu": Profile("cpu", Scaling(sizes=_sqrt2_steps(256, 4096), max_call_s=1.2, max_run_s=2.5,
                                  min_run_s=0.3, passes=("fwd", "bwd"), backward_sizes=(256, 512, 1024, 2048, 4096),
                                  spread_budget_s=60.0),
                   threads=1),
    "gpu": Profile(
        "gpu",
        Scaling(sizes=tuple(2 ** k for k in range(10, 18)), batch=1, heads=16, head_dim=128,
                window=1024, dtype="bfloat16", max_call_s=2.0, lstm_max_n=16384, max_run_s=3.0),
        ReceptiveField(),
        KVCache(heads=16, head_dim=64, layers=4, batch=8, prompt=128, new_tokens=256, window=128,
                dtype="bfloat16", intermediate=2048, vocab=4096, paged_batch=32, paged_max_seq=4096),
        TimerCheck(size=512, dtype="bfloat16", tolerance=0.03),
        packing=Packing(docs=32, median=512, sigma=0.8, max_len=2048, heads=16, head_dim=128, dtype="bfloat16"),
        time_budget_s=225.0,
    ),
    "tiny": Profile(
        "tiny",
        Scaling(sizes=(32, 64, 128), heads=2, head_dim=16, window=8, min_block_s=0.001,
                min_run_s=0.005, min_blocks=3, max_run_s=0.1, rep_ms=5.0, warmup_ms=2.0,
                max_call_s=30.0),
        ReceptiveField(depths=(1, 2, 3), window=4, n=16, dim=16, heads=2, kv_heads=1),
        KVCache(heads=4, head_dim=8, layers=1, batch=1, prompt=4, new_tokens=6, window=5,
                intermediate=64, vocab=64, paged_batch=2, paged_max_seq=32, block_size=4),
        TimerCheck(size=64, rounds=1, min_run_s=0.02),
        packing=Packing(docs=4, median=6, max_len=16, heads=2, head_dim=8),
        threads=1,
        peak_size=256,
        mem_repeats=3,
        mem_budget_s=0.2,
    ),
}


def get(name: str, **overrides) -> Profile:
    if name not in PROFILES:
        raise KeyError(f"unknown profile {name!r}; known: {', '.join(PROFILES)}")
    prof = PROFILES[name]
    if overrides.get("sizes"):
        prof = replace(prof, scaling=replace(prof.scaling, sizes=tuple(overrides["sizes"]), backward_sizes=None))
    if overrides.get("passes"):
        prof = replace(prof, scaling=replace(prof.scaling, passes=tuple(overrides["passes"])))
    return prof
