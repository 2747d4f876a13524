"""Probe (run 63): can one half of the streams' LocDiT (tensor-core bound) overlap the other half's
LMs (weight-streaming bound) on two CUDA streams? If so, a step of 64 streams could run as two
groups of 32 half a step apart: (LocDiT A | LMs B), then (LocDiT B | LMs A).

Full-size VoxCPM2-shaped random bf16 model, graph_ops runner of 64 slots at 300 cached tokens. Each
piece is its own CUDA graph: dit(g) = LocDiT condition + 9-step CFG sampler of group g's slots,
lm(g) = LocEnc + base LM + FSQ + residual LM decode of group g. cuBLASLt's tuned choices share one
workspace, so VOXCPM_LT_GEMM=0 (torch's per-stream cuBLAS workspaces) for every variant.
Prints device ms per replay (CUDA events, 20 iterations after 3 warm-ups).
"""

import os
import sys
from pathlib import Path

os.environ["VOXCPM_LT_GEMM"] = "0"
sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

import torch  # noqa: E402

from perf.profile_step import MODES, decoding_runner, random_model  # noqa: E402
from voxcpm_triton.model.minicpm import DecodeSlots  # noqa: E402

ITERS = 20
dev = torch.device("cuda")
model = random_model("full", dev)
runner, _ = decoding_runner(model, 64, 300, 1024, 10, 2.0, MODES["graph_ops"])
model = runner.model
print("torch", torch.__version__, "cuda", torch.version.cuda, "green contexts:",
      hasattr(torch.cuda, "green_contexts"), flush=True)
noise = torch.randn(64, *runner.prev_patch.shape[1:], device=dev, dtype=runner.prev_patch.dtype)
groups = {"A": torch.arange(0, 32, device=dev), "B": torch.arange(32, 64, device=dev),
          "all": torch.arange(0, 64, device=dev)}


@torch.no_grad()
def dit(slots: torch.Tensor) -> None:
    mu = model.dit_condition(runner.lm_hidden[slots], runner.residual_hidden[slots])
    patch = runner._sample([(10, None)], noise[: slots.shape[0]], mu, runner.prev_patch[slots],
                           runner.cfg_value[slots])
    runner.prev_patch[slots] = patch


@torch.no_grad()
def lm(slots: torch.Tensor) -> None:
    positions = runner.positions[slots]
    p32 = positions.to(torch.int32)
    where = DecodeSlots(slots, positions, runner.max_context, (slots.to(torch.int32), p32, p32 + 1))
    embed = model.embed_patches(runner.prev_patch[slots].unsqueeze(1))[:, 0]
    next_lm, next_residual = model.decode_lms(embed, runner.base_cache.pair, runner.residual_cache.pair, where)
    runner.lm_hidden[slots] = next_lm
    runner.residual_hidden[slots] = next_residual


graphs = {}
for name, fn in (("dit", dit), ("lm", lm)):
    for group, slots in groups.items():
        for _ in range(3):
            fn(slots)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            fn(slots)
        graphs[f"{name}_{group}"] = g
torch.cuda.synchronize()
s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()


def timed(body) -> float:
    for _ in range(3):
        body()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(ITERS):
        body()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / ITERS


def together(a: str, b: str):
    """Replays graphs a (on s1) and b (on s2) at once; the default stream waits for both."""
    def body() -> None:
        main = torch.cuda.current_stream()
        s1.wait_stream(main)
        s2.wait_stream(main)
        with torch.cuda.stream(s1):
            graphs[a].replay()
        with torch.cuda.stream(s2):
            graphs[b].replay()
        main.wait_stream(s1)
        main.wait_stream(s2)
    return body


def one(*names: str):
    def body() -> None:
        for n in names:
            graphs[n].replay()
    return body


rows = [
    ("dit(64)", one("dit_all")), ("lm(64)", one("lm_all")), ("dit(64) + lm(64): today's step", one("dit_all", "lm_all")),
    ("dit(32)", one("dit_A")), ("lm(32)", one("lm_A")),
    ("dit(A) + lm(B) in turn", one("dit_A", "lm_B")),
    ("dit(A) | lm(B) on two streams", together("dit_A", "lm_B")),
    ("pipelined step: (dit A | lm B), (dit B | lm A)",
     lambda: (together("dit_A", "lm_B")(), together("dit_B", "lm_A")())),
    ("dit(A) | dit(B) on two streams", together("dit_A", "dit_B")),
    ("lm(A) | lm(B) on two streams", together("lm_A", "lm_B")),
]
print("| what | ms |\n|---|---|")
for label, body in rows:
    print(f"| {label} | {timed(body):.3f} |", flush=True)
