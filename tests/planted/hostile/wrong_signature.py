"""Hostile target: defines the protocol name with parameters the protocol cannot call.

Must be reported as a broken target ("lacks parameter(s)"), not skipped.
"""


def scaled_dot_product_attention(q, k):
    return q
