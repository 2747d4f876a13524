"""Time from a burst of simultaneous arrivals to their first patch, on the GPU, in-process.

When N requests arrive together (a load test's first wave, a busy server), their first audio waits
for one engine step that prefills all N prompts and then decodes every live stream; this measures
that step and splits it into prefill and decode (a second, decode-only step of the same batch),
for zero-shot prompts (no LocEnc pass in the prefill) and prompts that continue 8 patches of audio.
Full-size VoxCPM2-shaped random bf16 weights, CUDA graphs and custom ops as served.

    python perf/admission_latency.py --out DIR [--bursts 1,4,16,64] [--text-tokens 30]

Writes DIR/admission_latency.json and .md. Environment knobs it is meant to compare:
VOXCPM_PREFILL_GRAPH_ROWS (prompts per prefill graph).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from perf.cuda_required import cuda_missing  # noqa: E402
from perf.profile_step import random_model, synchronize  # noqa: E402
from voxcpm_triton.engine.engine import Engine  # noqa: E402
from voxcpm_triton.engine.prefill import build_prefill  # noqa: E402
from voxcpm_triton.engine.prefill_graphs import MAX_ROWS  # noqa: E402
from voxcpm_triton.engine.request import GenerationRequest  # noqa: E402

PROMPT_PATCHES = 8  # audio continued by the "with audio" prompts


def burst(config, count: int, text_tokens: int, audio: bool, tag: str) -> list[GenerationRequest]:
    requests = []
    for i in range(count):
        tokens = torch.randint(200, min(1000, config.lm.vocab_size), (text_tokens + i % 7,),
                               generator=torch.Generator().manual_seed(i))
        latents = torch.randn(PROMPT_PATCHES, config.patch_size, config.feat_dim) if audio else None
        seq = build_prefill(tokens, None, latents, config)
        requests.append(GenerationRequest(f"{tag}-{i}", seq.tokens, seq.feats, seq.text_mask, seq.audio_mask,
                                          seq.context_patches, min_len=2, max_len=10_000, seed=i))
    return requests


def timed_step(engine: Engine) -> float:
    synchronize()
    start = time.perf_counter()
    outputs = engine.step()
    synchronize()
    assert outputs and all(o.error is None for o in outputs), outputs[:2]
    return (time.perf_counter() - start) * 1e3


def measure(engine: Engine, config, count: int, text_tokens: int, audio: bool, repeats: int) -> dict:
    first, decode = [], []
    for r in range(repeats + 1):  # the first round captures what the warm-up did not
        requests = burst(config, count, text_tokens, audio, f"b{count}-{int(audio)}-{r}")
        for request in requests:
            engine.submit(request)
        step_ms = timed_step(engine)
        decode_ms = timed_step(engine)
        for request in requests:
            engine.cancel(request.request_id)
        engine.step()
        if r:
            first.append(step_ms)
            decode.append(decode_ms)
    first_ms, decode_ms = statistics.median(first), statistics.median(decode)
    return {"burst": count, "with_audio": audio, "first_step_ms": first_ms, "decode_ms": decode_ms,
            "prefill_ms": first_ms - decode_ms}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--bursts", default="1,4,16,64")
    parser.add_argument("--text-tokens", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if cuda_missing("admission_latency"):
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    bursts = [int(b) for b in args.bursts.split(",")]
    model = random_model("full", torch.device("cuda"))
    began = time.perf_counter()
    # Each timed step books its own decode (no launch-ahead), so prefill and decode can be told apart.
    engine = Engine(model, max_slots=max(bursts), max_context=1024, device="cuda", window_patches=1,
                    launch_ahead=False)
    startup_s = time.perf_counter() - began
    results = [measure(engine, model.config, count, args.text_tokens, audio, args.repeats)
               for audio in (False, True) for count in bursts]
    lines = [f"prefill graph rows {MAX_ROWS}; engine start (graph capture) {startup_s:.1f} s", "",
             "| prompts | burst | first step ms | of it prefill ms | decode step ms |", "|---|---|---|---|---|"]
    for r in results:
        kind = f"+{PROMPT_PATCHES} audio patches" if r["with_audio"] else "zero-shot"
        lines.append(f"| {kind} | {r['burst']} | {r['first_step_ms']:.1f} | {r['prefill_ms']:.1f} | "
                     f"{r['decode_ms']:.1f} |")
    table = "\n".join(lines)
    (args.out / "admission_latency.md").write_text(table + "\n")
    (args.out / "admission_latency.json").write_text(json.dumps(
        {"prefill_graph_rows": MAX_ROWS, "startup_s": startup_s, "text_tokens": args.text_tokens,
         "results": results}, indent=1))
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
