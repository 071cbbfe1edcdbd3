"""Consistency: the session's targets held to each other on the same inputs (every family's names).

``test_consistency.py`` runs one differential check per protocol name: each family declares its
compared names' ``Case``s next to its configs (``CASES`` in ``suites/<family>/specs.py``), a name its
record marks ``not_compared`` is skipped with the reason. Here: the engine they share
(``differential.py``: calling every target alike and holding each output to the first target's), and
the cases that need more than a call (``models.py``: model names compared with the same weights;
``varlen.py``: packed attention, against itself and against dense SDPA per sequence).
"""
