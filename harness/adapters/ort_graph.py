"""One ONNX node run by onnxruntime's CPU execution provider: the shared session builder of the
``ort_*`` adapters (``ort_attention``, ``ort_positions``, ``ort_norms``).

A user of onnxruntime runs an exported model; the adapters run one node of it, built here as a
one-node model and held in an ``InferenceSession`` (cached by its signature: building a session
costs milliseconds, running one microseconds). Tensors cross as NumPy arrays, as ORT's Python
API takes them; ``to_torch`` brings an output back to the caller's device.
"""
from __future__ import annotations

import functools

import numpy as np
import onnxruntime as ort
import torch
from onnx import TensorProto, helper

#: torch dtypes the adapters feed to ORT (NumPy has no bfloat16: ORT's bfloat16 kernels are not reached)
ELEM = {torch.float32: TensorProto.FLOAT, torch.float16: TensorProto.FLOAT16, torch.float64: TensorProto.DOUBLE,
        torch.int32: TensorProto.INT32, torch.int64: TensorProto.INT64, torch.bool: TensorProto.BOOL}


@functools.lru_cache(maxsize=128)
def session(op: str, domain: str, inputs: tuple[tuple[str, int], ...], outputs: tuple[tuple[str, int], ...],
            attrs: tuple[tuple[str, object], ...], opset: int) -> ort.InferenceSession:
    """A session running one ``op`` node. ``inputs``: (name, TensorProto element type) in the op's
    input order, ``""`` names for inputs left out; ``outputs`` likewise; ``attrs`` sorted pairs."""
    vi = [helper.make_tensor_value_info(n, t, None) for n, t in inputs if n]
    vo = [helper.make_tensor_value_info(n, t, None) for n, t in outputs if n]
    names = [n for n, _ in inputs]
    while names and not names[-1]:
        names.pop()
    node = helper.make_node(op, names, [n for n, _ in outputs], domain=domain or None, **dict(attrs))
    opsets = [helper.make_opsetid("", opset)] + ([helper.make_opsetid(domain, 1)] if domain else [])
    return load(helper.make_model(helper.make_graph([node], op, vi, vo), opset_imports=opsets))


def load(model) -> ort.InferenceSession:
    """An ``InferenceSession`` of ``model`` (a ModelProto) on the CPU execution provider."""
    options = ort.SessionOptions()
    options.log_severity_level = 4  # a rejected configuration is raised to the caller, not logged to stderr too
    options.intra_op_num_threads = 1
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def np_of(t: torch.Tensor) -> np.ndarray:
    return np.ascontiguousarray(t.detach().cpu().numpy())


def to_torch(a: np.ndarray, like: torch.Tensor) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(a)).to(like.device)
