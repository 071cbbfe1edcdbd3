"""Hostile target: sets SIGALRM to SIG_IGN (a library that installs its own signal handling), then
busy-waits: an in-process timeout that relies on SIGALRM never fires."""
import signal


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False):
    signal.signal(signal.SIGALRM, signal.SIG_IGN)
    while True:
        pass
