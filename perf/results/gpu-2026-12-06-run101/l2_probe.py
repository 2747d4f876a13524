"""Run 101's probe: the LM's 64-row GEMMs (64 streams' decode) with their weight in L2 against
cold. A ceiling for prefetching a GEMM's weight into L2 from the kernel before it (the decode
attention before o_proj, the swiglu before down / the next qkv). us per call (CUDA events around
the GEMM alone, median of 50); warm: the same GEMM ran just before; cold: 256 MB written just before.

    python perf/results/gpu-2026-12-06-run101/l2_probe.py
"""

import statistics

import torch
import torch.nn.functional as F

SHAPES = {"qkv": (2048, 2560), "o_proj": (2048, 2048), "gate_up": (2048, 12288), "down": (6144, 2048)}


def timed(fn, before, iters: int = 50) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(iters):
        before()
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3)
    return statistics.median(times)


def main() -> None:
    torch.manual_seed(0)
    flush = torch.empty(256 * 2**20, dtype=torch.uint8, device="cuda")
    print(torch.cuda.get_device_name())
    print("| GEMM | rows x k -> n | weight MB | cold us | warm us | cold TB/s | warm TB/s |")
    print("|---|---|---|---|---|---|---|")
    for rows in (64, 22):
        for name, (k, n) in SHAPES.items():
            x = torch.randn(rows, k, device="cuda", dtype=torch.bfloat16)
            w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16) / k ** 0.5

            def gemm():
                F.linear(x, w)

            gemm()
            cold = timed(gemm, lambda: flush.fill_(1))
            warm = timed(gemm, gemm)
            mb = w.numel() * 2 / 1e6
            print(f"| {name} | {rows} x {k} -> {n} | {mb:.1f} | {cold:.2f} | {warm:.2f} | {mb / cold:.2f} | "
                  f"{mb / warm:.2f} |")


if __name__ == "__main__":
    main()
