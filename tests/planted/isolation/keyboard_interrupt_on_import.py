"""Hostile target: raises KeyboardInterrupt at import (a library's own signal handling). In-process
pytest exited with status 2 and no output."""
raise KeyboardInterrupt
