"""One benchmark worker per device.

``harness bench --device all`` (every CUDA device) or ``--devices cuda:0,cuda:1`` plans
the suites round-robin over the devices and starts one worker process per device, each
writing its own run folder ``OUT/worker<i>_<device>``; ``harness report OUT/worker*``
merges them into one report. A device never runs two workers, so timings of one do not
contend with another's.
"""
from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path


def plan(suites: list[str], devices: list[str]) -> list[tuple[str, list[str]]]:
    """(device, suites) per worker: suites round-robin, one worker per listed device;
    a device left without a suite gets no worker."""
    if not devices:
        raise ValueError("no devices to place workers on")
    out: list[tuple[str, list[str]]] = [(d, []) for d in devices]
    for i, suite in enumerate(suites):
        out[i % len(devices)][1].append(suite)
    return [(d, s) for d, s in out if s]


def worker_dir(out: str, index: int, device: str) -> Path:
    return Path(out) / f"worker{index}_{device.replace(':', '')}"


def launch(argv: list[str], suites: list[str], devices: list[str], out: str) -> int:
    """Run ``python -m harness bench <argv> --device D --suite S --out OUT/workerI_D`` per device.

    ``argv`` holds the caller's other options (without --device/--devices/--suite/--out).
    Returns the worst exit status of the workers.
    """
    procs, workers = [], plan(suites, devices)
    for i, (device, mine) in enumerate(workers):
        folder = worker_dir(out, i, device)
        cmd = [sys.executable, "-m", "harness", "bench", *argv, "--device", device,
               "--suite", ",".join(mine), "--out", str(folder)]
        print(f"worker {i} on {device}: {', '.join(mine)} -> {folder}", file=sys.stderr, flush=True)
        procs.append(subprocess.Popen(cmd))
    codes = [p.wait() for p in procs]
    merge = shlex.join(["python", "-m", "harness", "report",
                        *(str(worker_dir(out, i, d)) for i, (d, _) in enumerate(workers))])
    print(f"workers finished (exit {codes}); merge them with: {merge}", file=sys.stderr)
    return max(codes) if codes else 0
