"""Continuous-batching generation engine: requests, per-slot KV cache, scheduler, runner."""
