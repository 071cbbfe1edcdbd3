"""The user's own reference.py in the working folder: `python -m harness repro` must not import it."""
OWNER = "user"
