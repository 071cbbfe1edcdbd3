"""The ground floor: where the harness's folders are (``layout``), the options every command shares
(``options``), its optional dependencies and libraries (``extras``, ``optional``), the versions a report
records (``versions``), whether a pytest session is a harness session (``scope``) and the garbage
collector of ``harness check``'s processes (``heap``) and its shards of a CI matrix (``shards``). Standard library
and little else; everything above imports from here."""
