"""Normalization: LayerNorm, RMSNorm, the residual block's norm placement and their backward."""
