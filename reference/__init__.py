"""Reference implementations of the protocol: plain, readable, float64 math.

``--impl reference`` (the default target) runs the suites against these.
One component per module; shapes are in each module's docstring.
"""
from reference.attention import scaled_dot_product_attention
from reference.sliding_window import sliding_window_attention

__all__ = ["scaled_dot_product_attention", "sliding_window_attention"]
