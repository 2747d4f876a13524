"""In-process Python API: load a checkpoint folder, generate speech as float32 PCM chunks.

    tts = VoxCPM.from_pretrained("path/to/VoxCPM2", devices=[0])
    for chunk in tts.generate(target_text="Hello."):
        ...  # np.float32 [k * samples_per_patch] at tts.sample_rate, k = 1, 2, 4, 4, ... patches

Each device gets its own model copy and continuous-batching engine, stepped by a background thread,
so concurrent generate() calls from several threads share batched steps.
"""

from __future__ import annotations

import itertools
import numbers
import queue
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import torch

from voxcpm_triton.audio.chunks import DEFAULT_MAX_NEW
from voxcpm_triton.audio.prompt_audio import check_unit_range
from voxcpm_triton.audio.vocoder import WindowedVocoder
from voxcpm_triton.checkpoint.loader import LoadedCheckpoint, check_device, load_checkpoint
from voxcpm_triton.config import load_config
from voxcpm_triton.engine.engine import Engine
from voxcpm_triton.engine.request import CFG_VALUE_DEFAULT, TIMESTEPS_DEFAULT
from voxcpm_triton.frontend import Frontend
from voxcpm_triton.serving.engine_loop import EngineLoop

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
_END = object()
# A device, or several (an int is a CUDA index); None or "cpu": the CPU.
DeviceSpec = int | str | torch.device | Sequence[int | str | torch.device] | None
# A sound file's path, or mono samples (with their rate passed beside them).
AudioInput = str | Path | np.ndarray | None


class _QueueSink:
    """Receives one stream's windows from the engine thread; the caller's generator drains it."""

    def __init__(self) -> None:
        self.items: queue.Queue = queue.Queue()
        self.cancelled = False

    def send_window(self, window: np.ndarray, new_patches: int) -> None:
        self.items.put((window, new_patches))

    def finish(self) -> None:
        self.items.put(_END)

    def fail(self, message: str) -> None:
        self.items.put(RuntimeError(message))

    def is_cancelled(self) -> bool:
        return self.cancelled


class _Device:
    """One device's checkpoint copy, frontend, vocoder and stepping engine."""

    def __init__(self, checkpoint: LoadedCheckpoint, device: torch.device, max_slots: int, max_context: int):
        self.checkpoint = checkpoint
        self.frontend = Frontend(checkpoint)
        self.vocoder = WindowedVocoder(checkpoint.audio_vae, checkpoint.config.patch_size)
        self.engine = Engine(checkpoint.model, max_slots, max_context, device, self.vocoder.window_patches)
        self.loop = EngineLoop(self.engine, chunk_patches=DEFAULT_MAX_NEW)
        self.loop.start()


def _resolve_devices(devices: DeviceSpec) -> list[torch.device]:
    if devices is None or devices == "cpu":
        return [torch.device("cpu")]
    if isinstance(devices, (int, str, torch.device)):
        devices = [devices]
    resolved = []
    for device in devices:
        try:
            device = torch.device(f"cuda:{device}" if isinstance(device, int) else device)
        except (RuntimeError, TypeError) as exc:
            raise ValueError(f"devices={devices!r}: {exc}") from None
        try:
            check_device(device)
        except ValueError as exc:
            raise ValueError(f"devices={devices!r}: {exc}") from None
        resolved.append(device)
    if not resolved:
        raise ValueError("devices must name at least one device (or be None / 'cpu')")
    return resolved


def _resolve_dtype(dtype: str | torch.dtype | None, config_dtype: str, device: torch.device) -> torch.dtype:
    if dtype is None:
        # The checkpoint's dtype on GPUs; CPUs run float32 (bf16 matmuls are slow there).
        return _DTYPES[config_dtype] if device.type == "cuda" else torch.float32
    if isinstance(dtype, str):
        if dtype not in _DTYPES:
            raise ValueError(f"dtype={dtype!r}; allowed: {', '.join(_DTYPES)}")
        return _DTYPES[dtype]
    return dtype


def _read_audio(audio: AudioInput, sample_rate: int | None, name: str) -> tuple[np.ndarray | None, int | None]:
    """A path (read with soundfile, channels averaged) or an array with its rate -> (mono, rate)."""
    rate_name = name.replace("wav", "sample_rate")
    if audio is None:
        if sample_rate is not None:
            raise ValueError(f"{rate_name} was given without {name}")
        return None, None
    if isinstance(audio, (str, Path)):
        import soundfile

        if sample_rate is not None:
            raise ValueError(f"{rate_name} is for an array; the file {str(audio)!r} gives its own rate")
        try:
            samples, file_rate = soundfile.read(str(audio), dtype="float32", always_2d=True)
        except (OSError, RuntimeError) as exc:  # soundfile's LibsndfileError is a RuntimeError
            raise ValueError(f"{name}: cannot read {str(audio)!r} as a sound file ({exc})") from None
        samples, rate = samples.mean(axis=1), int(file_rate)
    elif sample_rate is None:
        raise ValueError(f"{name} is an array: pass its sample rate ({rate_name})")
    else:
        samples, rate = np.asarray(audio, dtype=np.float32), _integer(rate_name, sample_rate)
    check_unit_range(name, samples)
    return samples, rate


def _integer(name: str, value: object) -> int:
    """`value` as an int (numpy's integers too); a float, a bool or a string is a TypeError."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {value!r}")
    return int(value)


def _real(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number, got {value!r}")
    return float(value)


class VoxCPM:
    def __init__(self, devices: list[_Device]):
        self._devices = devices
        self._ids = itertools.count()
        self._lock = threading.Lock()

    @classmethod
    def from_pretrained(cls, path: str | Path, devices: DeviceSpec = None, dtype: str | torch.dtype | None = None,
                        max_slots: int = 8, max_context: int | None = None,
                        lora: str | Path | None = None) -> "VoxCPM":
        """Load the checkpoint folder onto each device (None / "cpu": the CPU; [0, 1]: cuda:0, cuda:1);
        `lora`: a LoRA adapter folder from VoxCPM's fine-tuning, merged into the weights."""
        engines = []
        config = load_config(path)
        context = config.max_length if max_context is None else _integer("max_context", max_context)
        for device in _resolve_devices(devices):
            checkpoint = load_checkpoint(path, dtype=_resolve_dtype(dtype, config.dtype, device), device=device,
                                         lora=lora)
            engines.append(_Device(checkpoint, device, max_slots, context))
        return cls(engines)

    @property
    def sample_rate(self) -> int:
        return self._devices[0].checkpoint.config.sample_rate

    def close(self) -> None:
        for device in self._devices:
            device.loop.stop()

    def _pick(self) -> _Device:
        return min(self._devices, key=lambda d: d.loop.live_streams)

    def generate(self, target_text: str, prompt_wav: AudioInput = None, prompt_text: str | None = None,
                 prompt_sample_rate: int | None = None, reference_wav: AudioInput = None,
                 reference_sample_rate: int | None = None,
                 cfg_value: float = CFG_VALUE_DEFAULT, inference_timesteps: int = TIMESTEPS_DEFAULT, seed: int = 0,
                 max_len: int | None = None, min_len: int = 2, normalize: bool = False) -> Iterator[np.ndarray]:
        """Yield float32 PCM chunks at `sample_rate`: the first holds one latent patch, the next 2,
        then 4 each (audio.chunks), the last what is left.

        prompt_wav (+ prompt_text): a voice to continue; reference_wav (VoxCPM2): a voice to imitate
        without continuing it. Each is a file path or a mono float array with its sample rate.
        normalize: speak numbers, dates and symbols as words (the reference's normalize=True; needs
        the optional packages wetext and inflect).
        max_len caps the patches; the runaway guard (6 per target-text token + 10) always applies."""
        device = self._pick()
        prompt_audio, prompt_rate = _read_audio(prompt_wav, prompt_sample_rate, "prompt_wav")
        reference_audio, reference_rate = _read_audio(reference_wav, reference_sample_rate, "reference_wav")
        if prompt_text is not None and not isinstance(prompt_text, str):
            raise TypeError(f"prompt_text must be a str, got {type(prompt_text).__name__}")
        with self._lock:
            request_id = f"api-{next(self._ids)}"
        request = device.frontend.prepare(
            target_text, prompt_audio=prompt_audio, prompt_sample_rate=prompt_rate, prompt_text=prompt_text,
            reference_audio=reference_audio, reference_sample_rate=reference_rate, request_id=request_id,
            min_len=_integer("min_len", min_len),
            max_len=None if max_len is None else _integer("max_len", max_len),
            cfg_value=_real("cfg_value", cfg_value), timesteps=_integer("inference_timesteps", inference_timesteps),
            seed=_integer("seed", seed), normalize=normalize)
        device.engine.check(request)  # a ValueError here, not a failed stream
        sink = _QueueSink()
        device.loop.submit(request, sink)
        try:
            while True:
                item = sink.items.get()
                if item is _END:
                    return
                if isinstance(item, Exception):
                    raise item
                window, new_patches = item
                yield device.vocoder.decode([window], [new_patches])[0]
        finally:
            sink.cancelled = True  # a caller that stops early frees its slot
            device.engine.cancel(request_id)

    def generate_full(self, target_text: str, **kwargs) -> np.ndarray:
        """The whole waveform (float32, `sample_rate`) as one array."""
        chunks = list(self.generate(target_text, **kwargs))
        return np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.float32)
