"""Times one decode step of a full-size VoxCPM2-shaped random bf16 model on the GPU, per batch
size and per execution mode, with a torch.profiler op breakdown; also the first patch after
admission at one stream.

Modes (each a fresh ModelRunner over the same weights, fixed-shape step, kernel attention):
  eager          no CUDA graph, plain PyTorch layers
  graph          whole step in one CUDA graph, plain PyTorch layers
  graph_ops      graph + custom ops (fused add+RMSNorm, gate_up + SwiGLU, FSQ, CFG-Euler)
  graph_ops_compile  graph_ops with each decoder layer under torch.compile (last: it stays on)
  graph_ops_fp8  graph_ops with the LocDiT's GEMMs on FP8 from 256 rows (VOXCPM_FP8=1, opt-in
                 precision; perf/fp8_drift.py states how far its patches are from bf16's)
Step time = `runner.decode(streams)` end to end in-process (host upload, noise ring refills, the
graph replay, the one device-to-host copy), median over --iters after --warmup steps; replay =
device time of the graph alone (CUDA events), its rows pointed at the scratch slot; back to back =
wall time per replay of --iters replays of the streams' own step with no host work or sync between
them (the step an engine would approach that launched step n+1 before reading step n's output);
launch = host time of one graph.replay() call in that loop; ahead = wall time per step of --iters
steps run as the engine runs them with launch-ahead (step n+1 queued before step n is read).
RTF = step_ms / 160; audio s/s = B * 0.16 / step_s.

Usage: python perf/profile_step.py --out DIR [--batches 1,16,64,256] [--modes ...] [--budget-s 300]
Writes DIR/profile_step.json and DIR/profile_step.md (the table, also printed last) and
DIR/profile_ops.txt (profiler tables).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from perf.cuda_required import cuda_missing  # noqa: E402
from voxcpm_triton.checkpoint.make import config_dict  # noqa: E402
from voxcpm_triton.config import parse_config  # noqa: E402
from voxcpm_triton.engine.engine import Engine  # noqa: E402
from voxcpm_triton.engine.prefill import build_prefill  # noqa: E402
from voxcpm_triton.engine.request import GenerationRequest  # noqa: E402
from voxcpm_triton.engine.runner import ModelRunner  # noqa: E402
from voxcpm_triton.engine.scheduler import Stream  # noqa: E402
from voxcpm_triton.model.voxcpm import build_model  # noqa: E402
from voxcpm_triton.ops import library_status  # noqa: E402

STEP_AUDIO_S = 0.16
MODES = {
    "eager": dict(cuda_graphs=False, custom_ops=False, compile_layers_=False),
    "graph": dict(cuda_graphs=True, custom_ops=False, compile_layers_=False),
    "graph_ops": dict(cuda_graphs=True, custom_ops=True, compile_layers_=False),
    "graph_ops_compile": dict(cuda_graphs=True, custom_ops=True, compile_layers_=True),
    "graph_ops_fp8": dict(cuda_graphs=True, custom_ops=True, compile_layers_=False, fp8=True),
}
PROFILED_MODES = ("eager", "graph_ops", "graph_ops_compile", "graph_ops_fp8")


def random_model(size: str, device: torch.device) -> torch.nn.Module:
    """VoxCPM2 shapes, random weights made in bf16 on the device (no disk, no fp32 copy)."""
    config = parse_config(config_dict("voxcpm2", size))
    saved = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        with device:
            model = build_model(config)
    finally:
        torch.set_default_dtype(saved)
    with torch.no_grad():
        model.stop_head.weight.zero_()  # never stops: every step does the same work
    return model.eval()


def request(config, rid: str, text_tokens: int, timesteps: int, cfg: float, seed: int) -> GenerationRequest:
    tokens = torch.randint(200, min(1000, config.lm.vocab_size), (text_tokens,),
                           generator=torch.Generator().manual_seed(seed))
    seq = build_prefill(tokens, None, None, config)
    return GenerationRequest(rid, seq.tokens, seq.feats, seq.text_mask, seq.audio_mask, seq.context_patches,
                             min_len=2, max_len=10_000, cfg_value=cfg, timesteps=timesteps, seed=seed)


def decoding_runner(model, batch: int, context: int, max_context: int, timesteps: int, cfg: float,
                    options: dict) -> tuple[ModelRunner, list[Stream]]:
    """A runner whose `batch` slots look like streams with `context` cached tokens (random KV)."""
    device = model.stop_proj.weight.device
    runner = ModelRunner(model, batch, max_context, device, warm_up_graphs=False, fixed_shape=True,
                         **runner_options(options))
    for cache in (runner.base_cache, runner.residual_cache):
        cache.k.normal_()
        cache.v.normal_()
    live = slice(0, batch)
    runner.lm_hidden[live].normal_()
    runner.residual_hidden[live].normal_()
    runner.prev_patch[live].normal_()
    runner.cfg_value[live] = cfg
    runner.positions[live] = context
    streams = []
    for slot in range(batch):
        generator = torch.Generator(device=device)
        generator.manual_seed(slot)
        runner.generators[slot] = generator
        streams.append(Stream(request(model.config, f"s{slot}", 8, timesteps, cfg, slot), slot, budget=10_000))
    return runner, streams


def runner_options(options: dict) -> dict:
    """A mode's ModelRunner arguments; its precision goes to the runner through VOXCPM_FP8."""
    os.environ["VOXCPM_FP8"] = "1" if options.get("fp8") else "0"
    return {name: value for name, value in options.items() if name != "fp8"}


def step(runner: ModelRunner, streams: list[Stream]) -> None:
    runner.decode(streams)
    for stream in streams:
        stream.produced += 1


def synchronize() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def time_steps(runner: ModelRunner, streams: list[Stream], warmup: int, iters: int) -> dict:
    for _ in range(warmup):
        step(runner, streams)
    synchronize()
    times = []
    for _ in range(iters):
        start = time.perf_counter()
        step(runner, streams)
        times.append((time.perf_counter() - start) * 1e3)
    result = {"step_ms": statistics.median(times), "step_ms_min": min(times)}
    synchronize()
    start = time.perf_counter()
    previous = None
    for _ in range(iters):  # as Engine(launch_ahead=True): queue step n+1, then read step n
        pending = runner.launch(streams)
        if previous is not None:
            previous.result()
        previous = pending
    previous.result()
    result["ahead_ms"] = (time.perf_counter() - start) * 1e3 / iters
    graph = None if runner.graphs is None else runner.graphs.get(len(streams), streams[0].request.timesteps)
    if runner.graphs is not None and graph is None:
        result["graph_failure"] = runner.graphs.failure  # the step ran eagerly
    if graph is not None:
        synchronize()
        launches = []
        start = time.perf_counter()
        for _ in range(iters):
            launched = time.perf_counter()
            graph.replay()
            launches.append((time.perf_counter() - launched) * 1e3)
        synchronize()
        result["back_to_back_ms"] = (time.perf_counter() - start) * 1e3 / iters
        result["launch_ms"] = statistics.median(launches)
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        with torch.inference_mode():  # the graph's buffers are inference tensors
            graph.index[0].fill_(runner.scratch_slot)  # replays of padding rows: same work, no state change
        replays = []
        for _ in range(iters):
            begin.record()
            graph.replay()
            end.record()
            end.synchronize()
            replays.append(begin.elapsed_time(end))
        result["replay_ms"] = statistics.median(replays)
    return result


def profile_table(runner: ModelRunner, streams: list[Stream], steps: int, rows: int) -> str:
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if runner.device.type == "cuda" else [])
    with profile(activities=activities) as prof:
        for _ in range(steps):
            step(runner, streams)
        synchronize()
    averages = prof.key_averages()
    for key in ("self_cuda_time_total", "self_device_time_total"):
        try:
            return averages.table(sort_by=key, row_limit=rows)
        except (AttributeError, KeyError, ValueError, RuntimeError):
            continue
    return averages.table(row_limit=rows)


def first_patch_ms(model, options: dict, text_tokens: int, timesteps: int, cfg: float, repeats: int) -> float:
    """Admission to first patch at one stream: submit, then engine steps until the first patch is
    out (with launch-ahead, the second step call returns it, after queueing the next step)."""
    runner_options(options)
    engine = Engine(model, max_slots=1, max_context=min(1024, model.config.max_length),
                    device=model.stop_proj.weight.device, window_patches=1,
                    cuda_graphs=options["cuda_graphs"], custom_ops=options["custom_ops"],
                    compile_layers=options["compile_layers_"])
    times = []
    for i in range(repeats + 1):  # the first run warms the prefill shapes up
        req = request(model.config, f"p{i}", text_tokens, timesteps, cfg, i)
        synchronize()
        start = time.perf_counter()
        engine.submit(req)
        outputs = []
        while not outputs:
            outputs = engine.step()
        elapsed = (time.perf_counter() - start) * 1e3
        assert outputs[0].error is None, outputs
        engine.cancel(req.request_id)
        while engine.has_work:
            engine.step()
        if i:
            times.append(elapsed)
    del engine
    return statistics.median(times)


def markdown(results: list[dict], first_patch: dict) -> str:
    lines = ["| mode | B | step ms | ahead ms | graph replay ms | back to back ms | launch ms | RTF | audio s/s |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        if "error" in r:
            lines.append(f"| {r['mode']} | {r['batch']} | {r['error'][:60]} | | | | | | |")
            continue
        replay = f"{r['replay_ms']:.2f}" if "replay_ms" in r else ("capture failed" if "graph_failure" in r else "-")
        ahead, back_to_back, launch = (f"{r[key]:.2f}" if key in r else "-"
                                       for key in ("ahead_ms", "back_to_back_ms", "launch_ms"))
        lines.append(f"| {r['mode']} | {r['batch']} | {r['step_ms']:.2f} | {ahead} | {replay} | {back_to_back} | "
                     f"{launch} | {r['rtf']:.4f} | {r['audio_s_per_s']:.0f} |")
    for mode, value in first_patch.items():
        text = f"{value:.1f} ms" if isinstance(value, float) else value
        lines.append(f"\nfirst patch after admission ({mode}, B=1, 30-token text): {text}")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--batches", default="1,16,64,256")
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--context", type=int, default=300)
    parser.add_argument("--max-context", type=int, default=1024)
    parser.add_argument("--timesteps", type=int, default=10)
    parser.add_argument("--cfg", type=float, default=2.0)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--profile-batches", default="1,64")
    parser.add_argument("--profile-steps", type=int, default=3)
    parser.add_argument("--budget-s", type=float, default=330.0, help="skip what would start after this")
    parser.add_argument("--cpu-dry-run", action="store_true",
                        help="tiny model on the CPU (no graphs): checks the script, measures nothing useful")
    args = parser.parse_args()
    if not args.cpu_dry_run and cuda_missing("profile_step", "--cpu-dry-run"):
        return 2
    device = torch.device("cpu" if args.cpu_dry_run else "cuda")
    args.out.mkdir(parents=True, exist_ok=True)
    began = time.perf_counter()
    batches = [int(b) for b in args.batches.split(",")]
    profile_batches = {int(b) for b in args.profile_batches.split(",") if b}
    modes = [m for m in args.modes.split(",") if m]
    device_name = torch.cuda.get_device_name() if device.type == "cuda" else "cpu"
    print(f"device {device_name}, torch {torch.__version__}, kernels: {library_status()}", flush=True)
    model = random_model("tiny" if args.cpu_dry_run else "full", device)
    print(f"model built: {sum(p.numel() for p in model.parameters()) / 1e9:.2f} B params "
          f"({time.perf_counter() - began:.1f} s)", flush=True)

    results, profiles, first_patch = [], [], {}

    def save() -> str:
        """Written after every measurement, so a run cut short by its time box keeps what it got."""
        (args.out / "profile_ops.txt").write_text("\n".join(profiles))
        table = markdown(results, first_patch)
        summary = {"device": device_name, "torch": torch.__version__, "kernels": library_status(),
                   "context": args.context, "timesteps": args.timesteps, "cfg": args.cfg, "results": results,
                   "first_patch_ms": first_patch, "wall_s": time.perf_counter() - began}
        (args.out / "profile_step.json").write_text(json.dumps(summary, indent=1))
        (args.out / "profile_step.md").write_text(table + "\n")
        return table

    for mode in modes:
        options = MODES[mode]
        # Compiling is slow: the profiled sizes first, so the time budget keeps the ones that matter.
        ordered = sorted(batches, key=lambda b: b not in profile_batches) if options["compile_layers_"] else batches
        for batch in ordered:
            if time.perf_counter() - began > args.budget_s:
                results.append({"mode": mode, "batch": batch, "error": "skipped: time budget"})
                continue
            entry = {"mode": mode, "batch": batch}
            try:
                runner, streams = decoding_runner(model, batch, args.context, args.max_context, args.timesteps,
                                                  args.cfg, options)
                entry["kernel_attention"] = runner.kernel_attention
                entry.update(time_steps(runner, streams, args.warmup, args.iters))
                entry["rtf"] = entry["step_ms"] / (STEP_AUDIO_S * 1e3)
                entry["audio_s_per_s"] = batch * STEP_AUDIO_S / (entry["step_ms"] / 1e3)
                if batch in profile_batches and mode in PROFILED_MODES:
                    try:
                        table = profile_table(runner, streams, args.profile_steps, rows=30)
                    except Exception as exc:
                        table = f"profiler failed: {type(exc).__name__}: {exc}"
                    profiles.append(f"### {mode} B={batch} ({args.profile_steps} steps)\n{table}\n")
                if batch in profile_batches and mode in ("graph_ops", "graph_ops_fp8"):
                    # Kernels inside a replayed graph may show up as one graph launch: the same
                    # step launched eagerly names every kernel (their GPU times are the same).
                    runner = streams = None
                    gc.collect()
                    eager_options = dict(options, cuda_graphs=False)
                    runner, streams = decoding_runner(model, batch, args.context, args.max_context, args.timesteps,
                                                      args.cfg, eager_options)
                    for _ in range(args.warmup):
                        step(runner, streams)
                    try:
                        table = profile_table(runner, streams, args.profile_steps, rows=30)
                    except Exception as exc:
                        table = f"profiler failed: {type(exc).__name__}: {exc}"
                    profiles.append(f"### {mode} kernels launched eagerly B={batch} ({args.profile_steps} steps)"
                                    f"\n{table}\n")
            except Exception as exc:  # one failing mode must not hide the others' figures
                entry["error"] = f"{type(exc).__name__}: {exc}"
            runner = streams = None
            gc.collect()  # the runner and its graphs reference each other
            if device.type == "cuda":
                torch.cuda.empty_cache()
            results.append(entry)
            print(json.dumps(entry), flush=True)
            save()
        if mode in ("graph_ops", "graph_ops_compile") and time.perf_counter() - began <= args.budget_s:
            try:
                first_patch[mode] = first_patch_ms(model, options, 30, args.timesteps, args.cfg, repeats=5)
            except Exception as exc:
                first_patch[mode] = f"error {type(exc).__name__}: {exc}"
            print(f"first patch {mode}: {first_patch[mode]}", flush=True)
            save()

    table = save()
    print("\n".join(profiles)[-20000:])
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
