"""Run 63, call 4: where the gate_up kernel's in-mainloop norm statistic costs its time. Times
gate_up_sm90.fused at LocDiT shapes with norm_eps = 0 (the plain kernel) and 1e-5 (the normed one)
for the library named by VOXCPM_KERNELS_LIB: the full normed kernel, or diagnostic builds with
only its per-tile shared-memory reads (VOXCPM_DIAG=1: no final wait and scaling, the sums kept
alive by an empty asm) or only its final wait and scaling (VOXCPM_DIAG=2: no reads)."""

import sys

import torch

from voxcpm_triton.ops import gate_up_sm90, lt_gemm

label = sys.argv[1]
for rows in (1408, 5632):
    x = torch.randn(rows, 1024, device="cuda", dtype=torch.bfloat16)
    w = gate_up_sm90.interleave(torch.randn(8192, 1024, device="cuda", dtype=torch.bfloat16) / 32)
    for schedule in (0, 1):
        plain = lt_gemm.time_call(lambda: gate_up_sm90.fused(x, w, schedule, 0.0), calls=50) * 1e3
        normed = lt_gemm.time_call(lambda: gate_up_sm90.fused(x, w, schedule, 1e-5), calls=50) * 1e3
        print(f"| {label} | {rows} | {schedule} | {plain:.1f} | {normed:.1f} | {100 * (normed / plain - 1):+.1f}% |",
              flush=True)
