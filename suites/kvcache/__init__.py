"""KV cache: incremental decoding over a KV cache (``attention_with_kvcache``)."""
