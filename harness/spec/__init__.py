"""What is checked and how it is judged: the protocol's records (``protocol``, ``name_record``), what a
target may declare (``declarations``, ``conventions``), the configurations the suites draw
(``configs``), the tolerance policy and the statistical bounds (``tolerance``, ``stats``) and the costly
explanations of a failure (``explain``). No target is imported here."""
