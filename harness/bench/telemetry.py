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


@functools.lru_cache(maxsize=None)
def nvml_reader(index: int) -> Callable[[], dict] | None:
    """A function returning one NVML sample for GPU ``index``, or None without NVML."""
    try:
        import pynvml
        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
    except Exception:  # noqa: BLE001 - no driver, no library, no device
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
        return cls(nvml_reader(dev.index or 0), interval_s)

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
            try:
                self.samples.append(self.read())  # one sample at the end of the point
            except Exception:  # noqa: BLE001
                pass

    def summary(self) -> dict | None:
        return summarize(self.samples) if self.read is not None else None
