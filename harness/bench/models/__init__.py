"""What the benchmarks run besides the target: the model and kernel registry (``registry``: naive
attention, the banded kernel, the LSTM, the Mistral-style block, small Hugging Face models), the
banded O(n * w) kernel (``banded``), the Mistral-style block stack (``sliding_window_block``) and
the fine-tune's data (``finetune_data``). Benchmark things, not protocol references: ``reference/``
holds the float64 math the suites compare against and imports nothing from ``harness``.
"""
