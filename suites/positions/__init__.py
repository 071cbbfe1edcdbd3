"""Position encodings: sinusoidal, learned, RoPE, ALiBi, T5 buckets and bias, their stateful modules and backward."""
