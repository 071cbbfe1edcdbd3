"""The user's own reports package: the harness must never import it as its own."""
OWNER = "user"
