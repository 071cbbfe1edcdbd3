"""The verdicts and their tables: what one test learned (``outcome``), its kind decided once
(``verdict``), the rows a session collects (``session_rows``), the conformance, consistency and sweep
tables (``conformance_table``, ``consistency``, ``sweep_table``), known failures (``xfails``), the
benchmark run folder (``runfolder``) and the gate's rule (``gate_rule``). Imports nothing of the
boundary: a report is built without a target."""
