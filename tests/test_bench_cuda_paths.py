"""The benchmark's CUDA-only logic, exercised without a GPU where monkeypatching can stand
in for the device (fake CUDA events and clock, a fake pynvml, a fake triton, kernels that
raise torch.OutOfMemoryError), plus a few checks that need a real GPU (skipped without one).
No timing assertions: every clock here is fake, or only its bookkeeping is checked."""
from __future__ import annotations

import contextlib
import functools
import sys
import types
import weakref

import pytest
import torch

from harness.bench import Context, profiles, scaling, telemetry, timer
from harness.bench.points import Point, PointRunner, is_oom
from harness.bench.store import ResultStore, read_jsonl
from harness.bench.timer import Timing
from harness.cli import main as cli_main
from harness.boundary.loader import load_target

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA (a GPU and a CUDA build of torch)")


# ---------------------------------------------------------------- a fake CUDA backend

class FakeGPU:
    """A GPU clock (ms) that kernels advance, and events that read it when recorded."""

    def __init__(self):
        self.now_ms = 0.0
        self.calls = 0
        self.streams: list = []
        self.devices: list = []
        gpu = self

        class Event:
            def __init__(self, enable_timing=False, **_):
                assert enable_timing, "timing events need enable_timing=True"
                self.t = None

            def record(self, stream=None):
                gpu.streams.append(stream)
                self.t = gpu.now_ms

            def elapsed_time(self, other):  # milliseconds, as torch.cuda.Event's
                return other.t - self.t
        self.Event = Event

    def kernel(self, ms):
        def fn():
            self.calls += 1
            self.now_ms += ms
        return fn

    def install(self, monkeypatch, flush_ms: float = 0.0):
        gpu = self
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(torch.cuda, "Event", self.Event)
        monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)
        monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: ("stream", str(device)))

        @contextlib.contextmanager
        def device(dev):
            gpu.devices.append(str(dev))
            yield
        monkeypatch.setattr(torch.cuda, "device", device)
        real_empty = torch.empty

        class FlushBuffer:
            def zero_(self):
                gpu.now_ms += flush_ms

        def empty(*shape, device=None, **kw):
            if device is not None and torch.device(device).type == "cuda":
                return FlushBuffer()
            return real_empty(*shape, device=device, **kw)
        monkeypatch.setattr(torch, "empty", empty)


def test_time_cuda_fast_call_follows_triton_and_reports_seconds(monkeypatch):
    gpu = FakeGPU()
    gpu.install(monkeypatch, flush_ms=0.5)
    t = timer.time_cuda(gpu.kernel(1.0), warmup_ms=25.0, rep_ms=100.0, device="cuda:1")
    # 1 ms calls (+0.5 ms flush in the estimate): est 1.5 ms -> 16 warm-up, 66 repetitions
    assert t.repeats == 66 and gpu.calls == 1 + 5 + 16 + 66
    assert t.median_s == pytest.approx(1e-3) and t.min_s == pytest.approx(1e-3)  # ms -> s; flush outside
    assert t.method == "cuda_events_l2flush"
    assert set(gpu.streams) == {("stream", "cuda:1")} and gpu.devices == ["cuda:1"]  # cuda:1 current


def test_time_cuda_slow_call_is_capped_by_max_run_s(monkeypatch):
    gpu = FakeGPU()
    gpu.install(monkeypatch)
    t = timer.time_cuda(gpu.kernel(2000.0), rep_ms=100.0, flush=False, device="cuda", max_run_s=3.0)
    assert gpu.calls == 1 + 3 and t.repeats == 3  # no 5-call estimate, no warm-up, 3 repetitions
    assert t.median_s == pytest.approx(2.0) and t.method == "cuda_events"
    gpu.calls = 0
    t = timer.time_cuda(gpu.kernel(30.0), rep_ms=100.0, flush=False, max_run_s=0.2)
    assert gpu.calls == 1 + 6 and t.repeats == 6  # min_reps 10 capped to 0.2 s / 30 ms
    # time_fn hands max_run_s to the CUDA timer too
    gpu.calls = 0
    timer.time_fn(gpu.kernel(2000.0), "cuda:0", rep_ms=100.0, max_run_s=3.0, flush=False, min_blocks=9)
    assert gpu.calls == 4


def test_reference_timer_degrades_without_triton(monkeypatch):
    monkeypatch.setitem(sys.modules, "triton.testing", None)  # not installed
    ref, why = timer.reference_timer(lambda: None, "cuda:0")
    assert ref is None and "not importable" in why

    class Broken(types.ModuleType):  # installed but broken against this torch/driver
        def __getattr__(self, name):
            raise RuntimeError("0 active drivers ([]). There should only be one.")
    monkeypatch.setitem(sys.modules, "triton.testing", Broken("triton.testing"))
    ref, why = timer.reference_timer(lambda: None, "cuda:0")
    assert ref is None and "RuntimeError" in why
    seen = {}

    def do_bench(fn, warmup=25, rep=100, grad_to_none=None, quantiles=None, return_mode="mean"):
        seen.update(warmup=warmup, rep=rep, return_mode=return_mode)
        return 2.5  # ms
    monkeypatch.setitem(sys.modules, "triton.testing", types.SimpleNamespace(do_bench=do_bench))
    monkeypatch.setattr(torch.cuda, "device", lambda dev: contextlib.nullcontext())
    ref, why = timer.reference_timer(lambda: None, "cuda:0")
    assert ref == pytest.approx(2.5e-3) and why == "triton.testing.do_bench"
    assert seen == {"warmup": 25, "rep": 100, "return_mode": "median"}


# ---------------------------------------------------------------- NVML telemetry with a fake pynvml

class NVMLError(Exception):
    pass


def fake_pynvml(init_fails=False, power_fails=False):
    m = types.ModuleType("pynvml")
    m.NVMLError, m.NVML_CLOCK_SM, m.NVML_TEMPERATURE_GPU, m.asked, m.inits = NVMLError, 1, 0, [], []

    def init():
        if init_fails:
            raise NVMLError("Driver Not Loaded")
        m.inits.append(1)
    m.nvmlInit = init
    m.nvmlShutdown = lambda: m.inits.pop()

    m.nvmlDeviceGetHandleByUUID = lambda uuid: (_ for _ in ()).throw(NVMLError("Not Found"))
    m.nvmlDeviceGetHandleByIndex = lambda i: m.asked.append(i) or f"gpu{i}"
    m.nvmlDeviceGetMemoryInfo = lambda h: types.SimpleNamespace(used=7 * 2**30, total=141 * 10**9)

    m.nvmlDeviceGetPowerUsage = lambda h: 150_000 if not power_fails else 1 / 0  # milliwatts
    m.nvmlDeviceGetClockInfo = lambda h, kind: 1980
    m.nvmlDeviceGetTemperature = lambda h, kind: 41
    return m


@pytest.fixture
def nvml(monkeypatch):
    telemetry.nvml_reader.cache_clear()

    def install(**kw):
        m = fake_pynvml(**kw)
        monkeypatch.setitem(sys.modules, "pynvml", m)
        telemetry.nvml_reader.cache_clear()
        return m
    yield install
    telemetry.nvml_reader.cache_clear()


def test_nvml_sampler_reads_the_visible_device(nvml, monkeypatch):
    m = nvml()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    read = telemetry.nvml_reader(1)
    assert m.asked == [5]  # cuda:1 is NVML's GPU 5, not 1
    assert read() == {"gpu_mem_used_bytes": 7 * 2**30, "power_w": 150.0, "sm_clock_mhz": 1980, "temp_c": 41}
    with telemetry.Telemetry(read, interval_s=0.001) as tel:
        pass
    s = tel.summary()
    assert s["samples"] >= 2 and s["power_w"] == 150.0 and s["temp_c"] == 41


def test_nvml_failures_degrade_to_no_telemetry(nvml):
    nvml(init_fails=True)
    assert telemetry.nvml_reader(0) is None
    with telemetry.Telemetry(telemetry.nvml_reader(0)) as tel:
        pass
    assert tel.summary() is None
    m = nvml(power_fails=True)
    sample = telemetry.nvml_reader(0)()
    assert sample["power_w"] is None and sample["temp_c"] == 41  # one counter missing: the others stay

    def no_device(i):
        raise NVMLError("Invalid Argument")
    m.nvmlDeviceGetHandleByIndex = no_device
    telemetry.nvml_reader.cache_clear()
    assert len(m.inits) == 1
    assert telemetry.nvml_reader(0) is None and len(m.inits) == 1  # no device: its nvmlInit undone
    with telemetry.Telemetry(lambda: 1 / 0, interval_s=0.001) as tel:  # a sampler that always raises
        pass
    assert tel.summary() is None


def _fake_cuda_runtime(monkeypatch):
    """torch.cuda as the runner sees it on a GPU; returns the list of empty_cache calls."""
    calls = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: calls.append("empty_cache"))
    return calls


class Held:
    """Stands in for a large CUDA tensor held by a failed call."""


def test_runner_on_cuda_records_oom_frees_memory_and_samples_nvml(nvml, monkeypatch, tmp_path):
    nvml()
    calls = _fake_cuda_runtime(monkeypatch)
    alive = []

    def empty_cache():  # what the allocator could release: the failed call's tensors must be gone
        calls.append("empty_cache")
        alive.append(ref() is not None)
    monkeypatch.setattr(torch.cuda, "empty_cache", empty_cache)

    def oom():
        scores = Held()
        nonlocal ref
        ref = weakref.ref(scores)
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 128.00 GiB")
    ref = None
    pts = [Point("scaling", "a", {"n": 1}, lambda: {"time_s": 1.0}),
           Point("scaling", "a", {"n": 2}, oom),
           Point("scaling", "a", {"n": 3}, lambda: {"time_s": 2.0})]
    rows = PointRunner(ResultStore(tmp_path), "x", "cuda:0", progress=False, verbose=False).run(pts)
    assert [r["status"] for r in rows] == ["ok", "oom", "ok"]  # recorded, and the sweep went on
    assert "OutOfMemoryError" in rows[1]["reason"] and "128.00 GiB" in rows[1]["reason"]
    assert calls == ["empty_cache"] and alive == [False]
    assert rows[0]["telemetry"]["power_w"] == 150.0 and rows[0]["telemetry"]["samples"] >= 1


def test_library_allocation_failures_count_as_oom():
    assert is_oom(RuntimeError("CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`"))
    assert is_oom(RuntimeError("cuDNN error: CUDNN_STATUS_ALLOC_FAILED"))
    assert is_oom(torch.cuda.OutOfMemoryError("x")) and not is_oom(RuntimeError("CUBLAS_STATUS_EXECUTION_FAILED"))


# ---------------------------------------------------------------- the CUDA scaling path, faked

def test_cuda_scaling_path_records_oom_and_stops_growing_a_slow_case(monkeypatch, tmp_path):
    _fake_cuda_runtime(monkeypatch)
    prof = profiles.get("gpu", sizes=[1024, 2048, 4096, 8192])
    per_call = {1024: 0.01, 4096: 0.6}  # 0.6 s at 4096 -> 2.4 s predicted at 8192 > max_call_s 2 s
    timed = []

    def validate(ctx, case, p):
        if p["n"] == 2048:
            raise torch.OutOfMemoryError(f"CUDA out of memory at n={p['n']}")
        call = functools.partial(lambda n: None, p["n"])
        return call, {"peak_mem_bytes": p["n"] ** 2, "peak_mem_method": "cuda_max_allocated"}

    def timing_of(call, device, **kw):  # the PointCall's own timing (CUDA events where it lives)
        timed.append((device, kw))
        t = per_call[call.args[0]]
        return Timing(t, 0.0, t, 3, 1, "cuda_events_l2flush")
    monkeypatch.setattr(scaling, "validate", validate)
    monkeypatch.setattr(scaling, "timing_of", timing_of)
    ctx = Context(load_target("reference"), "reference", "cuda:0", prof, ResultStore(tmp_path / "r"),
                  peak_tflops={"bfloat16": 800.0}, cases=("torch.sdpa.flash",))
    rows = PointRunner(ctx.store, "reference", "cuda:0", progress=False, verbose=False).run(scaling.points(ctx))
    # pass by pass (forward first), each pass capping its own sweep
    assert [(r["params"]["pass"], r["params"]["n"], r["status"]) for r in rows] == [
        (pass_, n, status) for pass_ in ("fwd", "bwd", "fwd_bwd")
        for n, status in ((1024, "ok"), (2048, "oom"), (4096, "ok"), (8192, "skipped"))]
    assert "per-call budget" in rows[3]["reason"] and "per-call budget" in rows[7]["reason"]
    assert rows[4]["metrics"]["flops"] == 2.5 * rows[0]["metrics"]["flops"]
    assert rows[0]["params"]["dtype"] == "bfloat16" and rows[0]["params"]["head_dim"] == 128
    assert all(kw["max_run_s"] == prof.scaling.max_run_s for _, kw in timed) and timed[0][0] == "cuda:0"
    assert rows[2]["metrics"]["frac_of_peak"] == pytest.approx(rows[2]["metrics"]["tflops"] / 800.0)


def test_gpu_profile_sizes_and_budget():
    prof = profiles.get("gpu")
    assert prof.scaling.sizes[0] == 1024 and prof.scaling.sizes[-1] == 131072 and 65536 in prof.scaling.sizes
    assert prof.scaling.dtype == "bfloat16" and prof.scaling.lstm_max_n == 16384
    assert prof.time_budget_s is not None and prof.time_budget_s <= 240  # + one point < 4.5 min
    assert profiles.get("cpu").time_budget_s is None and profiles.get("tiny").time_budget_s is None


def test_unusable_cuda_device_is_refused(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert cli_main(["bench", "--out", str(tmp_path / "r"), "--device", "cuda:3", "--no-progress"]) == 2
    assert "no such device" in capsys.readouterr().err
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert cli_main(["bench", "--out", str(tmp_path / "r"), "--device", "cuda", "--no-progress"]) == 2


def test_env_cuda_details_never_raise():
    from harness.bench.env import cuda_details
    details = cuda_details(torch.device("cuda:0"))
    assert {"gpu_total_memory_bytes", "gpu_capability", "cudnn", "triton", "sdpa_backends_enabled"} <= set(details)
    assert torch.cuda.is_available() or details["gpu_total_memory_bytes"] is None


# ---------------------------------------------------------------- on a real GPU

@needs_cuda
def test_real_oom_is_recorded_and_memory_released(tmp_path):
    total = torch.cuda.get_device_properties(0).total_memory
    torch.cuda.synchronize(0)
    base, reserved = torch.cuda.memory_allocated(0), torch.cuda.memory_reserved(0)

    def too_big():
        keep = torch.empty(2**28, dtype=torch.uint8, device="cuda:0")  # held by the failed frame
        return torch.empty(2 * total, dtype=torch.uint8, device="cuda:0"), keep
    rows = PointRunner(ResultStore(tmp_path), "x", "cuda:0", progress=False, verbose=False).run(
        [Point("scaling", "a", {"n": 1}, too_big), Point("scaling", "a", {"n": 2}, lambda: {"time_s": 1.0})])
    assert [r["status"] for r in rows] == ["oom", "ok"]
    assert torch.cuda.memory_allocated(0) == base  # the failed call's tensors are gone
    assert torch.cuda.memory_reserved(0) <= reserved  # and the cache handed back


@needs_cuda
def test_real_gpu_sweep_tiny(tmp_path):
    out = tmp_path / "gpu"
    assert cli_main(["bench", "--out", str(out), "--profile", "tiny", "--device", "cuda", "--no-progress",
                     "--suite", "scaling", "--cases", "torch.sdpa.flash,torch.sdpa.efficient,reference.naive",
                     "--sizes", "128,256"]) == 0
    rows = read_jsonl(out / "results.jsonl")
    assert {r["status"] for r in rows} <= {"ok", "skipped"} and any(r["status"] == "ok" for r in rows)
    for r in rows:
        assert r["device"] == "cuda:0"
        if r["status"] == "ok":
            assert r["metrics"]["timer"] == "cuda_events_l2flush" and r["metrics"]["time_s"] > 0
            assert r["metrics"]["peak_mem_method"] == "cuda_max_allocated"
