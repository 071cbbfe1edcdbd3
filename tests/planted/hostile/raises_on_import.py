"""Hostile target: raises while being imported (a missing extension, a bad config).

Loading must not kill the session: every property for it fails with the import
error, and other targets still run.
"""
raise RuntimeError("hostile target: boom at import time")
