"""Benchmarks: streaming load harness, in-process engine bench, baselines, campaign scripts."""
