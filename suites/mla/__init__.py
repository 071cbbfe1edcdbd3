"""Latent attention (DeepSeek's MLA): the decode kernel over a latent KV cache shared by all query
heads, ``mla_decode`` (FlashMLA's contract)."""
