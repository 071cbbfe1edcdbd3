"""Attention: scaled dot-product attention, its masks and dropout, sliding windows, and their backward."""
