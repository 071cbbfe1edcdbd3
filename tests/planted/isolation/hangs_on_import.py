"""Hostile target: the import never finishes (a blocking device query, a lock at import)."""
import time

time.sleep(3600)
