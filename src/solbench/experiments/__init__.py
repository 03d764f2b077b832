"""Experiments on top of the agent track: skill transfer between variants, with paired statistics."""
