"""What the GPU-run kit's two test files share (``test_device_kit.py``, ``test_device_packing.py``)."""
from __future__ import annotations

import json
from pathlib import Path

#: the stages of scripts/device/gpu_baseline.sh, in the order it runs them (its priority order)
ORDER = ["bench_scaling", "triton_bench", "conformance", "triton_conformance", "finetune", "finetune_swap",
         "bench_checks"]


def stages(out: Path) -> dict:
    """stage name -> its record in a run's ``stages.json``."""
    return {s["stage"]: s for s in json.loads((out / "stages.json").read_text())["stages"]}
