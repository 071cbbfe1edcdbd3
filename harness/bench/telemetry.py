"""GPU telemetry during one benchmark point: NVML (nvidia-ml-py) sampled in a thread.

    with Telemetry.for_device(device) as tel:   # tel is None-safe: no GPU -> inert
        ... run the point ...
    row["telemetry"] = tel.summary()            # None without a GPU / NVML

Sampled every ``interval_s``: used device memory, board power, SM clock, GPU
temperature. The summary is the row's ``telemetry`` field: the maximum memory used
and temperature, the mean power and the median SM clock over the point (a clock that
drops during a point is how thermal or power throttling shows up), plus the sample count.
"""
from __future__ import annotations

import functools
import statistics
import threading
from typing import Callable

import torch


def nvml_index(index: int) -> int:
    """NVML's index of CUDA device ``index``: NVML numbers every GPU of the machine,
    CUDA only the visible ones (``CUDA_VISIBLE_DEVICES=3``: cuda:0 is NVML's 3)."""
    try:
        return int(torch.cuda._get_nvml_device_index(index))
    except Exception:  # noqa: BLE001 - private torch helper; absent or unable: same numbering
        return index


def _handle(pynvml, index: int):
    """The NVML handle of CUDA device ``index``: by UUID (exact whatever the numbering
    and CUDA_DEVICE_ORDER), else by NVML index."""
    try:
        uuid = str(torch.cuda.get_device_properties(index).uuid)
        return pynvml.nvmlDeviceGetHandleByUUID(uuid if uuid.startswith("GPU-") else f"GPU-{uuid}")
    except Exception:  # noqa: BLE001 - no CUDA here, an old torch, a MIG instance
        return pynvml.nvmlDeviceGetHandleByIndex(nvml_index(index))


@functools.lru_cache(maxsize=None)
def nvml_reader(index: int) -> Callable[[], dict] | None:
    """A function returning one NVML sample for CUDA device ``index``, or None without NVML.

    Any failure (no nvidia-ml-py, no driver, ``nvmlInit`` failing, no such device) means
    no telemetry, never an error. NVML stays initialised for the process (NVML counts
    nvmlInit/nvmlShutdown pairs, so ``harness.bench.env``'s own pair does not end it).
    """
    try:
        import pynvml
        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001 - no driver, no library
        return None
    try:
        handle = _handle(pynvml, index)
    except Exception:  # noqa: BLE001 - no such device
        try:
            pynvml.nvmlShutdown()
        except Exception:  # noqa: BLE001
            pass
        return None

    def read() -> dict:
        sample = {}
        for key, get in (
            ("gpu_mem_used_bytes", lambda: pynvml.nvmlDeviceGetMemoryInfo(handle).used),
            ("power_w", lambda: pynvml.nvmlDeviceGetPowerUsage(handle) / 1000.0),
            ("sm_clock_mhz", lambda: pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM)),
            ("temp_c", lambda: pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU)),
        ):
            try:
                sample[key] = get()
            except Exception:  # noqa: BLE001 - a counter this GPU does not expose
                sample[key] = None
        return sample
    return read


def summarize(samples: list[dict]) -> dict | None:
    """Reduce samples to the row's telemetry object (None when there are none)."""
    if not samples:
        return None

    def vals(key):
        return [s[key] for s in samples if s.get(key) is not None]

    mem, power, clock, temp = (vals(k) for k in ("gpu_mem_used_bytes", "power_w", "sm_clock_mhz", "temp_c"))
    return {
        "gpu_mem_used_bytes": max(mem) if mem else None,
        "power_w": statistics.fmean(power) if power else None,
        "power_max_w": max(power) if power else None,
        "sm_clock_mhz": statistics.median(clock) if clock else None,
        "sm_clock_min_mhz": min(clock) if clock else None,
        "temp_c": max(temp) if temp else None,
        "samples": len(samples),
    }


class Telemetry:
    """Background sampler; inert (summary None) when ``read`` is None."""

    def __init__(self, read: Callable[[], dict] | None, interval_s: float = 0.05):
        self.read = read
        self.interval_s = interval_s
        self.samples: list[dict] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @classmethod
    def for_device(cls, device, interval_s: float = 0.05) -> "Telemetry":
        dev = torch.device(device)
        if dev.type != "cuda" or not torch.cuda.is_available():
            return cls(None)
        index = dev.index if dev.index is not None else torch.cuda.current_device()
        return cls(nvml_reader(index), interval_s)

    def _loop(self) -> None:
        while True:
            try:
                self.samples.append(self.read())
            except Exception:  # noqa: BLE001 - telemetry must never break a point
                pass
            if self._stop.wait(self.interval_s):
                break

    def __enter__(self) -> "Telemetry":
        if self.read is not None:
            self._thread = threading.Thread(target=self._loop, name="nvml-telemetry", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join(timeout=5)
            if self._thread.is_alive():  # a hung NVML call: no end sample from this thread either
                return
            try:
                self.samples.append(self.read())  # one sample at the end of the point
            except Exception:  # noqa: BLE001
                pass

    def summary(self) -> dict | None:
        return summarize(list(self.samples)) if self.read is not None else None
