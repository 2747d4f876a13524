"""Write the golden files: outputs of the reference `voxcpm` package on the three tiny checkpoints.

    PYTHONPATH=. python tests/golden/make_golden.py            # from the repository root

For each variant (checkpoint = make_checkpoint(variant, seed=0)) one <variant>.safetensors holds:
  vae.audio / vae.latents       AudioVAE encode of a fixed random waveform (encoder rate)
  vae.decode_latents / vae.decoded  AudioVAE decode of fixed random latents
  <case>.patches / <case>.audio generated latent patches and waveform, fixed seed, for the cases
      zero_shot, continuation (prompt latents + prompt text) and, VoxCPM2 only, reference
  <case>.prompt_latents         the voice given to the case, as latents (no audio file decoding)
and metadata: texts, seeds, min/max length, and digests of the checkpoint tensors so a change in
the generator is caught before outputs are compared.
"""

from __future__ import annotations

import hashlib
import json
import sys
import tempfile
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.reference_shim import import_reference  # noqa: E402
from voxcpm_triton.checkpoint.make import VARIANTS, make_checkpoint  # noqa: E402

GOLDEN_DIR = Path(__file__).resolve().parent
TEXT = "Hello world, this is a test. 你好世界"
PROMPT_TEXT = "the voice of a model "
SEED = 1234
MIN_LEN = 5
MAX_LEN = 8
INFERENCE_TIMESTEPS = 10
CFG_VALUE = 2.0


def checkpoint_digest(folder: Path) -> str:
    """sha256 over every tensor of model.safetensors and audiovae.pth, in key order."""
    digest = hashlib.sha256()
    tensors = load_file(str(folder / "model.safetensors"))
    vae = torch.load(folder / "audiovae.pth", weights_only=True)["state_dict"]
    for prefix, state in (("model.", tensors), ("vae.", vae)):
        for name in sorted(state):
            digest.update((prefix + name).encode())
            digest.update(state[name].contiguous().view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def _prompt_latents(model, seconds: float, seed: int) -> torch.Tensor:
    """Latents of a random waveform whose length is a whole number of patches (no padding)."""
    vae = model.audio_vae
    patch_samples = model.patch_size * vae.chunk_size
    samples = max(1, round(seconds * vae.sample_rate / patch_samples)) * patch_samples
    audio = 0.3 * torch.randn(1, samples, generator=torch.Generator().manual_seed(seed))
    z = vae.encode(audio, vae.sample_rate)  # [1, D, frames]
    return z.view(vae.latent_dim, -1, model.patch_size).permute(1, 2, 0).contiguous()


def _generate(model, cache: dict | None, variant: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Generated patches (prompt context excluded) and the waveform the reference returns."""
    torch.manual_seed(SEED)
    outputs = model._generate_with_prompt_cache(
        target_text=TEXT, prompt_cache=cache, min_len=MIN_LEN, max_len=MAX_LEN,
        inference_timesteps=INFERENCE_TIMESTEPS, cfg_value=CFG_VALUE, streaming=False,
    )
    try:
        audio, _, patches = next(outputs)
    finally:
        outputs.close()
    if variant != "voxcpm2" and cache is not None:
        # VoxCPM1.x returns its 2 prompt context patches (streaming_prefix_len - 1) ahead of the
        # generated ones; its waveform already leaves them out.
        patches = patches[min(2, cache["audio_feat"].shape[0]):]
    return patches.float().contiguous(), audio[0].float().contiguous()


@torch.inference_mode()
def golden_for(variant: str, folder: Path) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    from voxcpm.model import VoxCPM2Model, VoxCPMModel

    model_class = VoxCPM2Model if variant == "voxcpm2" else VoxCPMModel
    model = model_class.from_local(str(folder), optimize=False, device="cpu")
    vae = model.audio_vae
    tensors: dict[str, torch.Tensor] = {}

    audio = 0.3 * torch.randn(int(0.37 * vae.sample_rate), generator=torch.Generator().manual_seed(11))
    tensors["vae.audio"] = audio
    tensors["vae.latents"] = vae.encode(audio[None], vae.sample_rate)[0].contiguous()
    decode_latents = torch.randn(vae.latent_dim, 6, generator=torch.Generator().manual_seed(12))
    tensors["vae.decode_latents"] = decode_latents
    tensors["vae.decoded"] = vae.decode(decode_latents[None])[0, 0].contiguous()

    cases: dict[str, dict | None] = {"zero_shot": None}
    prompt = _prompt_latents(model, 0.5, seed=13)
    cases["continuation"] = {"prompt_text": PROMPT_TEXT, "audio_feat": prompt, "mode": "continuation"}
    tensors["continuation.prompt_latents"] = prompt
    if variant == "voxcpm2":
        reference = _prompt_latents(model, 0.4, seed=14)
        cases["reference"] = {"ref_audio_feat": reference, "mode": "reference"}
        tensors["reference.prompt_latents"] = reference
    for case, cache in cases.items():
        tensors[f"{case}.patches"], tensors[f"{case}.audio"] = _generate(model, cache, variant)

    metadata = {
        "variant": variant,
        "checkpoint_digest": checkpoint_digest(folder),
        "settings": json.dumps({"text": TEXT, "prompt_text": PROMPT_TEXT, "seed": SEED, "min_len": MIN_LEN,
                                "max_len": MAX_LEN, "inference_timesteps": INFERENCE_TIMESTEPS,
                                "cfg_value": CFG_VALUE, "cases": sorted(cases)}, ensure_ascii=False),
        "reference": "voxcpm " + __import__("voxcpm").__dict__.get("__version__", "2.0.3"),
    }
    return tensors, metadata


def main() -> None:
    if import_reference() is None:
        raise SystemExit("the reference `voxcpm` package is not installed")
    with tempfile.TemporaryDirectory() as tmp:
        for variant in VARIANTS:
            folder = make_checkpoint(Path(tmp) / variant, variant, seed=0)
            tensors, metadata = golden_for(variant, folder)
            path = GOLDEN_DIR / f"{variant}.safetensors"
            save_file(tensors, str(path), metadata=metadata)
            shapes = {k: tuple(v.shape) for k, v in tensors.items() if k.endswith("patches")}
            print(f"{path.name}: {path.stat().st_size / 1e6:.2f} MB, generated patches {shapes}")


if __name__ == "__main__":
    main()
