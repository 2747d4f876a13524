"""Run 72: resampling 60 s of prompt audio from an odd rate (191996 Hz, gcd 4 with 16 kHz: a bank of
4000 phases), the time and the process's peak memory. `--whole` builds the kernel bank whole, as
resample did before its banks went in blocks.

    PYTHONPATH=. build/out/venv/bin/python perf/results/cpu-2026-12-05-run72/resample_odd_rate.py [--whole]
"""
import resource
import sys
import time

import torch

from voxcpm_triton.audio import resample as module

if "--whole" in sys.argv:
    module._MAX_KERNEL = 1 << 40
torch.set_num_threads(1)
audio = torch.randn(191996 * 60, generator=torch.Generator().manual_seed(0))
started = time.perf_counter()
out = module.resample(audio, 191996, 16000)
elapsed = time.perf_counter() - started
peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(f"{'whole' if '--whole' in sys.argv else 'blocks'}: {out.shape[0]} samples in {elapsed:.2f} s, "
      f"peak RSS {peak_mb:.0f} MB")
