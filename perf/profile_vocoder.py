"""Times WindowedVocoder.decode of B full-context windows (5 patches of context + k new ones of a
full-size VoxCPM2-shaped random AudioVAE) on the GPU, per batch size and per mode:

  fp32_whole   float32, every layer over the whole window, eager (the vocoder before this work)
  fp32         float32, each layer trimmed to the new patch's receptive field, eager
  bf16_eager   bfloat16 decoder copy, trimmed, eager
  bf16         bfloat16, trimmed, one CUDA graph per batch bucket, PyTorch layers only
  bf16_ops     bf16 with the fused CUDA ops (snake, snake_depthwise_conv) in its layers (the CUDA default)
  bf16_plain, bf16_ops_plain   bf16 / bf16_ops without the fast layers (VOXCPM_VOCODER_FAST_LAYERS=0:
               1x1 convs through cuDNN with separate bias and skip adds, trimmed views, padded convs,
               pageable host copy): the path before the fast layers, for comparison

Every mode but the *_plain ones runs the fast layers (the CUDA default, see WindowedVocoder).
Time = `decode(windows)` end to end (numpy in, host upload, decoder, one host copy per call),
measured with CUDA events around the call; median over --iters after --warmup calls (>= 1 with
graphs: the first call of a bucket captures). Audio s/s = B * k * 0.16 s / time (each window yields
k = --new-patches 160 ms patches at 48 kHz). TF32 stays at torch's defaults.

Usage: python perf/profile_vocoder.py --out DIR/profile_vocoder.json [--batches 1,16,64,256] [--new-patches 1,2,4]
       [--modes fp32_whole,fp32,bf16_eager,bf16,bf16_ops] [--iters 5] [--warmup 2] [--profile-batches 256]
Prints a Markdown table; writes the JSON (and the table beside it as .md) after every measurement.
--profile-batches: for each mode and each of these batch sizes, DIR/profile_vocoder_ops.txt gets a
torch.profiler table of the GPU kernels of 3 decode calls (sorted by their time, full kernel names)
and a per-layer table: GPU time of each decoder layer, sample-rate condition, and of each decoder
block's Snake, transposed conv and residual units (and within a unit its 1x1 GEMM), measured with
CUDA events around them in one eager decode of the same windows (no graph: launch gaps show at
small batches, not at 256).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from perf.cuda_required import cuda_missing  # noqa: E402
from voxcpm_triton.audio.audio_vae import build_audio_vae  # noqa: E402
from voxcpm_triton.audio.vae_layers import (  # noqa: E402
    CausalConv1d,
    CausalConvTranspose1d,
    DecoderBlock,
    ResidualUnit,
)
from voxcpm_triton.audio.vocoder import WindowedVocoder  # noqa: E402
from voxcpm_triton.checkpoint.make import config_dict, random_vae_state  # noqa: E402
from voxcpm_triton.ops import library_status  # noqa: E402

PATCH_SIZE = 4
MODES = {
    "fp32_whole": dict(dtype=torch.float32, trim=False, cuda_graphs=False, custom_ops=False),
    "fp32": dict(dtype=torch.float32, trim=True, cuda_graphs=False, custom_ops=False),
    "bf16_eager": dict(dtype=torch.bfloat16, trim=True, cuda_graphs=False, custom_ops=False),
    "bf16": dict(dtype=torch.bfloat16, trim=True, cuda_graphs=True, custom_ops=False),
    "bf16_ops": dict(dtype=torch.bfloat16, trim=True, cuda_graphs=True, custom_ops=True),
    "bf16_plain": dict(dtype=torch.bfloat16, trim=True, cuda_graphs=True, custom_ops=False, fast_layers=False),
    "bf16_ops_plain": dict(dtype=torch.bfloat16, trim=True, cuda_graphs=True, custom_ops=True, fast_layers=False),
}
DEFAULT_MODES = ("fp32_whole", "fp32", "bf16_eager", "bf16", "bf16_ops")


def _time_decode(vocoder: WindowedVocoder, windows: list[np.ndarray], warmup: int, iters: int,
                 new: int = 1) -> list[float]:
    news = [new] * len(windows)
    for _ in range(warmup):
        vocoder.decode(windows, news)
    times = []
    for _ in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        vocoder.decode(windows, news)  # ends with a host copy, so the device is idle after it
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return times


def _profile(vocoder: WindowedVocoder, windows: list[np.ndarray], calls: int) -> str:
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            vocoder.decode(windows)
        torch.cuda.synchronize()
    return prof.key_averages().table(sort_by="self_cuda_time_total", row_limit=40, max_name_column_width=160)


def _timed_parts(decoder: torch.nn.Module) -> list[tuple[str, torch.nn.Module, str]]:
    """(label, module, method) of every part the layer table times."""
    parts = []
    for index, layer in enumerate(decoder.model):
        if decoder.sr_cond_model is not None and str(index) in decoder.sr_cond_model:
            parts.append((f"{index}.sr_cond", decoder.sr_cond_model[str(index)], "forward"))
        name = type(layer).__name__
        parts.append((f"{index} {name}", layer, "forward"))
        if isinstance(layer, CausalConv1d) and layer.left_pad:
            parts.append((f"{index} {name} (unpadded)", layer, "forward_unpadded"))
            parts.append((f"{index} {name} (unpadded, one output channel as a GEMM)", layer, "forward_unpadded_mono"))
        if isinstance(layer, DecoderBlock):
            for child_index, child in enumerate(layer.block):
                parts.append((f"{index}.{child_index} {type(child).__name__}", child, "forward"))
                if isinstance(child, CausalConvTranspose1d):
                    parts.append((f"{index}.{child_index} into the residual buffer", child,
                                  "forward_with_extra_channels"))
                if isinstance(child, ResidualUnit):
                    # Called directly (not through forward) by the block's fast path.
                    parts.append((f"{index}.{child_index} ResidualUnit.accumulate_", child, "accumulate_"))
                    parts.append((f"{index}.{child_index}.pointwise GEMM", child.block[3], "add_pointwise"))
    return parts


def _layer_table(vocoder: WindowedVocoder, windows: list[np.ndarray]) -> str:
    """GPU ms per decoder part in one eager trimmed decode (CUDA events around each part)."""
    events: list[tuple[str, torch.cuda.Event, torch.cuda.Event, tuple]] = []

    def timed(label: str, method):
        def run(*args, **kwargs):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            events.append((label, start, end, tuple(args[0].shape)))  # listed in call order, parents first
            start.record()
            out = method(*args, **kwargs)
            end.record()
            return out
        return run

    patched = []
    for label, module, method in _timed_parts(vocoder.decoder):
        patched.append((module, method))
        setattr(module, method, timed(label, getattr(module, method)))  # instance attribute over the method
    try:
        batch = torch.from_numpy(np.stack(windows)).to(vocoder.device, vocoder.dtype)
        latents = batch.permute(0, 3, 1, 2).reshape(len(windows), vocoder.audio_vae.latent_dim, -1)
        with torch.inference_mode():
            vocoder._decode_trimmed(latents)  # warm-up: cuDNN / cuBLAS choices
            events.clear()
            total_start, total_end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            total_start.record()
            vocoder._decode_trimmed(latents)
            total_end.record()
        torch.cuda.synchronize()
    finally:
        for module, method in patched:
            delattr(module, method)
    lines = [f"eager trimmed decode: {total_start.elapsed_time(total_end):.3f} ms (the parts below leave out the "
             "trims and, on the fast path, the sample-rate conditions: one addcmul each, see the kernel table)",
             "| part | input shape | ms |", "|---|---|---|"]
    for label, start, end, shape in events:
        lines.append(f"| {label} | {list(shape)} | {start.elapsed_time(end):.3f} |")
    return "\n".join(lines)


def _table(rows: list[dict]) -> str:
    lines = ["| mode | B | new patches | decode ms | ms / patch | audio s/s |", "|---|---|---|---|---|---|"]
    for row in rows:
        patches = row["batch"] * row["new_patches"]
        lines.append(f"| {row['mode']} | {row['batch']} | {row['new_patches']} | {row['median_ms']:.2f} | "
                     f"{row['median_ms'] / patches:.3f} | {row['audio_s_per_s']:.0f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="JSON file to write")
    parser.add_argument("--batches", default="1,16,64,256")
    parser.add_argument("--modes", default=",".join(DEFAULT_MODES))
    parser.add_argument("--iters", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--profile-batches", default="", help="batch sizes to write profiler tables for")
    parser.add_argument("--new-patches", default="1",
                        help="new patches per window (chunks.py), each timed at every batch size; "
                             "windows then hold the full context plus them")
    args = parser.parse_args(argv)
    if cuda_missing("profile_vocoder"):
        return 2
    batches = [int(b) for b in args.batches.split(",")]
    profiled = {int(b) for b in args.profile_batches.split(",") if b}
    modes = args.modes.split(",")
    news = [int(n) for n in args.new_patches.split(",")]
    unknown = [m for m in modes if m not in MODES]
    if unknown or args.iters < 1 or args.warmup < 0 or min(batches) < 1 or min(news) < 1:
        parser.error(f"--modes from {sorted(MODES)} (got {unknown}), --iters >= 1, --warmup >= 0, "
                     "batches and new patches >= 1")

    started = time.perf_counter()
    config = config_dict("voxcpm2", "full")
    vae = build_audio_vae(config["audio_vae_config"], "voxcpm2")
    vae.load_state_dict(random_vae_state(config, seed=0))
    vae = vae.fold_weight_norm().eval().cuda()
    rng = np.random.default_rng(0)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    ops_file = out.parent / "profile_vocoder_ops.txt"
    if profiled:
        ops_file.write_text("")
    rows: list[dict] = []
    for mode in modes:
        built = time.perf_counter()
        vocoder = WindowedVocoder(vae, PATCH_SIZE, max_new_patches=max(news), **MODES[mode])
        graphs = 0 if vocoder.graphs is None else len(vocoder.graphs.captured)
        print(f"{mode}: built in {time.perf_counter() - built:.1f} s ({graphs} CUDA graphs)", flush=True)
        seconds_per_patch = vocoder.samples_per_patch / vocoder.sample_rate
        for batch, new in [(batch, new) for new in news for batch in batches]:
            length = vocoder.window_patches - 1 + new
            windows = [(0.5 * rng.standard_normal((length, PATCH_SIZE, vae.latent_dim)))
                       .astype(np.float32) for _ in range(batch)]
            times = _time_decode(vocoder, windows, args.warmup, args.iters, new)
            median = statistics.median(times)
            rows.append({"mode": mode, "batch": batch, "new_patches": new, "median_ms": median, "times_ms": times,
                         "audio_s_per_s": batch * new * seconds_per_patch / (median / 1e3)})
            print(f"{mode} B={batch} new={new}: {median:.2f} ms", flush=True)
            if batch in profiled and new == news[0]:
                with ops_file.open("a") as handle:
                    handle.write(f"### {mode} B={batch} (3 decode calls)\n{_profile(vocoder, windows, 3)}\n\n")
                    handle.write(f"### {mode} B={batch} per layer\n{_layer_table(vocoder, windows)}\n\n")
            out.write_text(json.dumps({"device": torch.cuda.get_device_name(), "kernels": library_status(),
                                       "window_patches": vocoder.window_patches, "rows": rows}, indent=1))
            out.with_suffix(".md").write_text(_table(rows) + "\n")
        del vocoder
        torch.cuda.empty_cache()
    print(_table(rows))
    print(f"total {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
