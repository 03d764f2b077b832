"""Integrity checks that run around a candidate solution (static scan first, dynamic checks later)."""
