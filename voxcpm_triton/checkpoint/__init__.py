"""Checkpoint folders in the official layout: strict loading and a generator of random ones."""
