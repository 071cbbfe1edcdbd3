"""Peak memory of one call, in bytes above what was allocated before it.

CUDA: ``torch.cuda.reset_peak_memory_stats`` -> call -> ``max_memory_allocated()``
minus ``memory_allocated()`` before (the caching allocator's exact count; inputs
that already exist are not counted). Method "cuda_max_allocated".

CPU: tracemalloc does not see torch's allocator, so we use the kernel's peak
resident set size: writing "5" to /proc/self/clear_refs resets VmHWM to the current
RSS, then VmHWM after the call minus VmRSS before is the call's peak growth. glibc
serves allocations >= 32 MiB (the score matrices that make attention O(n^2)) with
mmap and returns them on free, so they show up exactly; small allocations come from
the heap and may reuse memory freed earlier, so small peaks read low. Method
"rss_hwm_delta"; None where /proc is unavailable (not Linux).

CPU allocator (``keep_freed_memory``): by default glibc returns every freed block of
>= 32 MiB to the kernel, so each call of an O(n^2) kernel page-faults its score
matrices in again and the timing measures the kernel's page faults as much as its
arithmetic (70 % of the naive attention's time at n = 4096 on a 2-core VM). For
timing, ``harness bench`` therefore sets glibc's M_MMAP_MAX = 0 and M_TRIM_THRESHOLD =
max, so freed memory stays in the heap and is reused -- the CPU analogue of torch's
CUDA caching allocator. The memory-measurement calls run in the opposite mode: before each,
``malloc_trim(0)`` hands the free heap pages back to the kernel, and during it every block of
>= ``MEASURE_MMAP_BYTES`` (64 KiB) is mmapped and unmapped on free. A temporary freed inside the
call then leaves the resident set at once, so VmHWM sees the live peak; in the heap, a block
freed and another allocated elsewhere both stayed resident, and the peak read anywhere between
the live peak and 1.6x it, with the heap's layout (the float64 reference attention at n = 2048:
928 to 1062 MiB in two processes; mmapped: 656 MiB in both). A free chunk that the timing left in
the heap can still serve a big block ahead of mmap, so ``peak_memory_repeated`` runs each call in
a fresh thread, which glibc serves from an arena of its own: in one process out of four the
reference attention read one score matrix more at every size (1456: 407 MiB against 334).
env.json records the mode.

Resolution (``resolution_bytes``): blocks under ``MEASURE_MMAP_BYTES`` still come from the
measuring thread's arena, whose top the earlier calls left resident (malloc_trim does not release
a thread arena's top), and the kernel's RSS counters are per-CPU counts folded into the total in
batches of up to ``max(64, 2 x CPUs)`` pages, so VmRSS and VmHWM lag by up to that many pages per
CPU (here, 2 CPUs: allocations read ~128 KiB low). A reading under
``R = max(MEASURE_MMAP_BYTES, batch pages x page x CPUs)`` cannot be told from a call whose
blocks are all small: such a point's ``peak_mem_bytes`` is null and ``peak_mem_resolution_bytes``
says R ("below resolution (< R bytes)"); the gate never compares it. Until this, blocks were mmapped
from 1 MiB: every block of a small point came from the resident heap and read 0 or whatever crossed
1 MiB (torch's SDPA backward at n = 512: 0 in one run, 663,552 B in the next; 260 KiB in 6 calls of
7 here). From 64 KiB the same backward reads 2.5-2.6 MiB in every call (its three gradients alone
are 1.5 MiB), n = 256 1.1-1.2 MiB. Rows written before carry no resolution; the gate takes 1 MiB
for them (``harness.verdicts.gate_rule.LEGACY_RESOLUTION_BYTES``).

Repeats (``peak_memory_repeated``): even so one call's RSS peak is a noisy sample where blocks
under 1 MiB and the math libraries' own buffers matter (the banded kernel at n = 4096 read 58 to
90 MiB in five calls of one process, mmapped or not). The call is measured several times; the median is the point's
``peak_mem_bytes`` and min/max its spread, from which the baseline gate derives the allowance
(reports/gate.py), as it does for times from their IQR.
"""
from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import statistics
import threading
import time
from pathlib import Path
from typing import Callable

import torch

from harness.bench.timer import synchronize

_STATUS = Path("/proc/self/status")
_CLEAR = Path("/proc/self/clear_refs")


_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD, _M_MMAP_MAX = -1, -3, -4
#: while a memory measurement runs (keeping mode): blocks this large are mmapped (module doc)
MEASURE_MMAP_BYTES = 64 << 10
_libc = None
_keeping = False


def _mallopt(param: int, value: int) -> bool:
    global _libc
    try:
        if _libc is None:
            _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return bool(_libc.mallopt(ctypes.c_int(param), ctypes.c_int(value)))
    except (OSError, AttributeError):  # not glibc
        return False


def keep_freed_memory(enable: bool = True) -> str:
    """Make glibc keep freed memory for reuse (see the module doc); returns the mode."""
    global _keeping
    if enable and _mallopt(_M_MMAP_MAX, 0) and _mallopt(_M_TRIM_THRESHOLD, 2**31 - 1):
        _keeping = True
        return ("glibc: M_MMAP_MAX=0, M_TRIM_THRESHOLD=max (freed memory reused); memory measured "
                f"with blocks >= {MEASURE_MMAP_BYTES} B mmapped, resolution {resolution_bytes()} B")
    if not enable and _keeping:
        _mallopt(_M_MMAP_MAX, 65536)
        _mallopt(_M_TRIM_THRESHOLD, 128 * 1024)
        _mallopt(_M_MMAP_THRESHOLD, 128 * 1024)
        _keeping = False
    return "default"


@contextlib.contextmanager
def _fresh_mappings():
    """While measuring (keeping mode): free heap pages go back to the kernel (malloc_trim), so
    the call's allocations fault pages in again, and blocks of >= MEASURE_MMAP_BYTES are mmapped,
    so what the call frees leaves the resident set: VmHWM sees its live peak (module doc)."""
    if not _keeping:
        yield
        return
    try:
        _libc.malloc_trim(ctypes.c_size_t(0))
    except AttributeError:
        pass
    _mallopt(_M_MMAP_THRESHOLD, MEASURE_MMAP_BYTES)
    _mallopt(_M_MMAP_MAX, 65536)
    try:
        yield
    finally:
        _mallopt(_M_MMAP_MAX, 0)


def resolution_bytes(cpus: int | None = None) -> int:
    """R: the smallest CPU peak (rss_hwm_delta) this probe resolves (module doc): the mmap
    threshold while measuring, or the RSS counters' per-CPU batches, whichever is larger."""
    cpus = cpus or os.cpu_count() or 1
    try:
        page = os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        page = 4096
    return max(MEASURE_MMAP_BYTES, max(64, 2 * cpus) * page * cpus)


def _rss_fields() -> dict[str, int]:
    out = {}
    for line in _STATUS.read_text().splitlines():
        if line.startswith(("VmHWM:", "VmRSS:")):
            key, value = line.split(":", 1)
            out[key] = int(value.split()[0]) * 1024
    return out


def cpu_hwm_supported() -> bool:
    try:
        _CLEAR.write_text("5")
        return "VmHWM" in _rss_fields()
    except OSError:
        return False


def in_own_arena(fn: Callable[[], object]) -> object:
    """``fn()`` in a new thread, with the caller's torch grad / inference mode and thread count;
    glibc gives the thread its own malloc arena, so blocks the caller's heap freed earlier cannot
    serve its allocations (module doc). Its exception is raised here."""
    grad, inference, threads = torch.is_grad_enabled(), torch.is_inference_mode_enabled(), torch.get_num_threads()
    box: dict = {}

    def run() -> None:
        torch.set_num_threads(threads)
        try:
            with torch.inference_mode(inference), torch.set_grad_enabled(grad):
                box["out"] = fn()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            box["exc"] = exc

    thread = threading.Thread(target=run, name="harness-peak-memory", daemon=True)
    thread.start()
    thread.join()
    if "exc" in box:
        raise box["exc"]
    return box["out"]


def peak_memory(fn: Callable[[], object], device="cpu", own_arena: bool = False
                ) -> tuple[object, int | None, str]:
    """Run ``fn()`` once; return (its result, peak bytes above the start or None, method).
    ``own_arena`` (CPU, keeping mode): the call runs in a fresh thread (``in_own_arena``)."""
    dev = torch.device(device)
    if dev.type == "cuda":
        synchronize(dev)
        torch.cuda.reset_peak_memory_stats(dev)
        base = torch.cuda.memory_allocated(dev)
        out = fn()
        synchronize(dev)
        return out, torch.cuda.max_memory_allocated(dev) - base, "cuda_max_allocated"
    if not cpu_hwm_supported():
        return fn(), None, "unavailable"
    with _fresh_mappings():
        _CLEAR.write_text("5")  # VmHWM := VmRSS
        before = _rss_fields()["VmRSS"]
        out = in_own_arena(fn) if own_arena and _keeping else fn()
        after = _rss_fields()["VmHWM"]
    return out, max(0, after - before), "rss_hwm_delta"


def peak_memory_repeated(fn: Callable[[], object], device="cpu", repeats: int = 1,
                         budget_s: float | None = None,
                         clock: Callable[[], float] = time.perf_counter) -> tuple[object, dict]:
    """``peak_memory`` of up to ``repeats`` calls of ``fn`` (fewer once ``budget_s`` is spent, but
    two when ``repeats`` >= 2: a process's first call carries one-time allocations -- the first
    KV-cache decode read 9-10 MiB, the next ones 1.1-2.6 MiB -- and the median_low of two is the
    smaller; one where the counter is exact or unavailable). Returns the first call's result and the metrics
    ``peak_mem_bytes`` (median), ``peak_mem_min_bytes``, ``peak_mem_max_bytes``,
    ``peak_mem_repeats`` and ``peak_mem_method``; on a CPU also ``peak_mem_resolution_bytes`` (R),
    and a median under R is ``peak_mem_bytes`` None: below resolution (module doc)."""
    start = clock()
    first, peak, method = peak_memory(fn, device, own_arena=True)
    peaks = [peak]
    while (method == "rss_hwm_delta" and len(peaks) < repeats
           and (len(peaks) < 2 or budget_s is None or clock() - start < budget_s)):
        out, peak, _ = peak_memory(fn, device, own_arena=True)
        del out
        peaks.append(peak)
    metrics = {"peak_mem_bytes": peaks[0], "peak_mem_method": method}
    if peaks[0] is not None:
        metrics.update(peak_mem_bytes=statistics.median_low(peaks), peak_mem_min_bytes=min(peaks),
                       peak_mem_max_bytes=max(peaks), peak_mem_repeats=len(peaks))
    if method == "rss_hwm_delta":
        r = resolution_bytes()
        metrics["peak_mem_resolution_bytes"] = r
        if metrics["peak_mem_bytes"] < r:
            metrics["peak_mem_bytes"] = None
    return first, metrics
