"""A user's kernels: an RMSNorm with a real-world bug (the mean square, not its square root)."""
import torch
from torch import nn

__version__ = "0.3"


class RMSNorm(nn.Module):
    def __init__(self, normalized_shape, eps=None, elementwise_affine=True):
        super().__init__()
        shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        self.normalized_shape, self.eps = shape, eps
        self.weight = nn.Parameter(torch.ones(shape)) if elementwise_affine else None

    def forward(self, x):
        h = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
        dims = tuple(range(h.dim() - len(self.normalized_shape), h.dim()))
        eps = torch.finfo(h.dtype).eps if self.eps is None else self.eps
        y = h / (h.pow(2).mean(dim=dims, keepdim=True) + eps)  # BUG: should be h * rsqrt(ms + eps)
        if self.weight is not None:
            y = y * self.weight.to(y.dtype)
        return y.to(x.dtype)
