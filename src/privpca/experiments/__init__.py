"""Experiments: the demo now; the papers' reproductions build on the same runner."""
