"""Write tests/golden/resample.safetensors: prompt audio resampled as the reference's model files do.

    PYTHONPATH=. python tests/golden/make_resample_golden.py TORCHAUDIO_SRC     # from the repository root

VoxCPM1.x (voxcpm/model/voxcpm.py) resamples prompts with torchaudio.functional.resample's defaults;
torchaudio is not installed here (its build must match torch's), so TORCHAUDIO_SRC names the
torchaudio/functional/functional.py of an unpacked torchaudio wheel (2.11.1 for the file in the
repository), and its two resampling functions run from that source. VoxCPM2 (voxcpm/model/voxcpm2.py)
loads prompts with librosa.load(sr=...); librosa 0.11's resample with its default res_type is
soxr.resample(quality="soxr_hq") cut or zero-padded to ceil(n * new / orig) samples, computed here
the same way with the soxr the repository installs.

For each (version, orig, new) the file holds `<version>_<orig>_<new>.in` (0.05 s of seeded noise at
`orig`) and `.out`.
"""

from __future__ import annotations

import math
import sys
import typing
import warnings
from pathlib import Path

import numpy as np
import soxr
import torch
from safetensors.torch import save_file

OUT = Path(__file__).resolve().parent / "resample.safetensors"
CASES = [(1, 48000, 44100), (1, 16000, 44100), (1, 8000, 44100), (1, 96000, 44100), (1, 48000, 16000),
         (1, 22050, 16000), (2, 48000, 16000), (2, 44100, 16000), (2, 22050, 16000), (2, 8000, 16000),
         (2, 96000, 16000)]


def torchaudio_resample(source: Path):
    text = source.read_text()
    names = {"torch": torch, "math": math, "Tensor": torch.Tensor, "Optional": typing.Optional,
             "_CPU": torch.device("cpu"), "warnings": warnings}
    for name in ("_get_sinc_resample_kernel", "_apply_sinc_resample_kernel"):
        start = text.index(f"def {name}(")
        exec(text[start:text.index("\ndef ", start + 1)], names)

    def resample(waveform: torch.Tensor, orig: int, new: int) -> torch.Tensor:
        gcd = math.gcd(orig, new)
        kernel, width = names["_get_sinc_resample_kernel"](orig, new, gcd, 6, 0.99, "sinc_interp_hann", None,
                                                            waveform.device, waveform.dtype)
        return names["_apply_sinc_resample_kernel"](waveform[None], orig, new, gcd, kernel, width)[0]

    return resample


def librosa_resample(waveform: torch.Tensor, orig: int, new: int) -> torch.Tensor:
    out = soxr.resample(waveform.numpy(), orig, new, quality="soxr_hq")
    length = int(np.ceil(waveform.shape[0] * (float(new) / orig)))
    out = out[:length] if out.shape[0] >= length else np.pad(out, (0, length - out.shape[0]))
    return torch.from_numpy(out.astype(np.float32))


def main() -> int:
    v1 = torchaudio_resample(Path(sys.argv[1]))
    tensors = {}
    for index, (version, orig, new) in enumerate(CASES):
        audio = 0.3 * torch.randn(orig // 20, generator=torch.Generator().manual_seed(index))
        tensors[f"{version}_{orig}_{new}.in"] = audio
        tensors[f"{version}_{orig}_{new}.out"] = (v1 if version == 1 else librosa_resample)(audio, orig, new)
    save_file(tensors, str(OUT))
    print(f"wrote {OUT} ({len(CASES)} cases)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
