"""Consistency: the session's targets held to each other on the same inputs (every family's names).

One module per family of protocol names (``test_consistency_<family>.py``: its names' ``Case``s and
the test that runs them), the engine they share (``differential.py``: calling every target alike
and holding each output to the first target's), and the cases that need more than a call
(``models.py``: model names compared with the same weights; ``varlen.py``: packed attention,
against itself and against dense SDPA per sequence).
"""
