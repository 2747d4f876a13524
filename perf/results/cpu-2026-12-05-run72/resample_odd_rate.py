"""Run 72: resampling 60 s of prompt audio from odd rates, the time and the process's peak memory, as
voxcpm_triton.audio.resample does it for a VoxCPM2 prompt (soxr) or a VoxCPM1.x one (torchaudio's
filter bank, in blocks of phases when whole it would be large). `--whole` builds a VoxCPM1.x bank
whole, as torchaudio does (for 44101 Hz that is 7.8 GB: only 191996 Hz fits this machine).

    PYTHONPATH=. build/out/venv/bin/python perf/results/cpu-2026-12-05-run72/resample_odd_rate.py VERSION ORIG NEW [--whole]
"""
import resource
import sys
import time

import torch

from voxcpm_triton.audio import resample as module

version, orig, new = (int(arg) for arg in sys.argv[1:4])
if "--whole" in sys.argv:
    module.MAX_BANK = 1 << 40
torch.set_num_threads(1)
audio = torch.randn(orig * 60, generator=torch.Generator().manual_seed(0))
started = time.perf_counter()
out = module.resample(audio, orig, new, version)
elapsed = time.perf_counter() - started
peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(f"VoxCPM{'2' if version == 2 else '1.x'} {orig} -> {new} Hz{' (whole bank)' if '--whole' in sys.argv else ''}: "
      f"{out.shape[0]} samples in {elapsed:.2f} s, peak RSS {peak_mb:.0f} MB")
