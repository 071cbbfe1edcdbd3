"""Hostile target: imports fine and defines no protocol name at all.

Every attention property is skipped, with a reason naming the missing attribute.
"""
HELPER = "nothing to see here"
