"""CLI: python -m client "Text to speak" -o out.wav [--prompt-wav p.wav --prompt-text "..."]
[--reference-wav r.wav] [--voice-id NAME] [--register-only] [--seed N] ...

Streams the audio from the server's `voxcpm` model into a WAV file, printing progress, the latency
of the first chunk and the real-time factor. Ctrl-C cancels the request on the server. A text of
"-" is read from standard input."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import soundfile

from client.streaming import StreamStats, VoxCPMClient, VoxCPMError, build_inputs


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m client", description=__doc__.splitlines()[0])
    parser.add_argument("text", nargs="?",
                        help='text to speak; "-" reads it from standard input (not needed with --register-only)')
    parser.add_argument("-o", "--output", default="out.wav", help="WAV file to write (default out.wav)")
    parser.add_argument("--url", default="127.0.0.1:8001",
                        help="tritonserver gRPC address (default 127.0.0.1:8001)")
    parser.add_argument("--prompt-wav", help="voice recording to continue with --prompt-text, or without it (VoxCPM2) "
                        "to imitate (any rate soundfile reads; channels are averaged)")
    parser.add_argument("--prompt-text", help="transcript of --prompt-wav (continuation mode)")
    parser.add_argument("--reference-wav", help="VoxCPM2: voice recording to imitate, alone or beside --prompt-wav and "
                        "--prompt-text")
    parser.add_argument("--voice-id", help="register the voice of --prompt-wav / --reference-wav under this name, or "
                        "use a registered one")
    parser.add_argument("--register-only", action="store_true",
                        help="only register --voice-id from --prompt-wav / --reference-wav")
    parser.add_argument("--cfg-value", type=float, help="classifier-free guidance (server default 2.0)")
    parser.add_argument("--timesteps", type=int, help="flow-matching timesteps (server default 10)")
    parser.add_argument("--max-seconds", type=float, help="stop after this much audio")
    parser.add_argument("--seed", type=int, help="noise seed; the same seed gives the same audio")
    parser.add_argument("--normalize", action="store_true",
                        help="speak numbers, dates and symbols as words (the reference's normalize=True)")
    args = parser.parse_args(argv)
    if args.text is None and not args.register_only:
        parser.error('the text to speak is required ("-" reads it from standard input)')
    return args


def _read_text(text: str) -> str:
    """The text as given, or for "-" what standard input holds without the whitespace around it, so
    that `echo ... |` or a text file speaks the same words as typed on the command line."""
    return sys.stdin.read().strip() if text == "-" else text


def _unwritable(path: str) -> str | None:
    """Why the audio could not be written to `path`, found before the synthesis rather than after."""
    target = Path(path)
    if target.is_dir():
        return "it is a folder"
    if not target.parent.is_dir():
        return f"there is no folder {str(target.parent)!r}"
    if target.suffix[1:].upper() not in soundfile.available_formats():
        return f"soundfile writes no {target.suffix or 'extensionless'!r} files; name it .wav"
    return None


def _read_wav(path: str | None) -> tuple[np.ndarray | None, int | None]:
    """(its channels' mean as float32, its rate), or (None, None) without a path. VoxCPM mixes a
    recording down the same way, as does the in-process api."""
    if not path:
        return None, None
    audio, rate = soundfile.read(path, dtype="float32", always_2d=True)
    return audio.mean(axis=1), rate


def _progress(stats: StreamStats) -> str:
    return f"{stats.chunks} chunks, {stats.audio_s:.2f} s of audio"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    problem = None if args.register_only else _unwritable(args.output)  # registering writes no audio
    if problem is not None:
        print(f"cannot write {args.output}: {problem}", file=sys.stderr)
        return 2
    client = VoxCPMClient(args.url)
    try:
        prompt_audio, prompt_rate = _read_wav(args.prompt_wav)
        reference_audio, reference_rate = _read_wav(args.reference_wav)
    except (OSError, RuntimeError) as exc:  # soundfile's errors (LibsndfileError) are RuntimeErrors
        print(f"cannot read the voice's audio: {exc}", file=sys.stderr)
        return 2
    voice = dict(prompt_audio=prompt_audio, prompt_sample_rate=prompt_rate, prompt_text=args.prompt_text,
                 reference_audio=reference_audio, reference_sample_rate=reference_rate)
    try:
        # A value its tensor cannot hold (a seed past int64, timesteps past int32) is refused here,
        # before anything is sent: the server would get it wrapped.
        inputs = None if args.register_only else build_inputs(
            _read_text(args.text), **voice, voice_id=args.voice_id, cfg_value=args.cfg_value,
            timesteps=args.timesteps, max_seconds=args.max_seconds, seed=args.seed,
            normalize=args.normalize or None)
    except (TypeError, ValueError) as exc:
        print(f"invalid request: {exc}", file=sys.stderr)
        return 2
    try:
        if args.register_only:
            if (prompt_audio is None and reference_audio is None) or not args.voice_id:
                print("--register-only needs --voice-id and --prompt-wav or --reference-wav", file=sys.stderr)
                return 2
            client.register_voice(args.voice_id, **voice)
            print(f"registered voice {args.voice_id!r}")
            return 0
        stats = StreamStats()
        chunks = []
        # On a terminal the progress line is rewritten in place; in a log or a pipe, where the
        # carriage returns would leave every update glued on one line, only the final count shows.
        live = sys.stdout.isatty()
        for chunk in client.stream_inputs(inputs, stats):
            chunks.append(chunk)
            if stats.chunks == 1:
                print(f"first chunk after {stats.first_chunk_s * 1000:.1f} ms")
            if live:
                print(f"\r{_progress(stats)}", end="", flush=True)
        print(f"\r{_progress(stats)}" if live else _progress(stats))
    except KeyboardInterrupt:
        print("\ncancelled", file=sys.stderr)
        return 130
    except VoxCPMError as exc:
        print(f"server error: {exc}", file=sys.stderr)
        return 1
    audio = np.concatenate(chunks) if chunks else np.zeros(0, np.float32)
    try:
        soundfile.write(args.output, audio, stats.sample_rate or 16000)
    except (OSError, RuntimeError) as exc:  # soundfile's LibsndfileError is a RuntimeError
        print(f"cannot write {args.output}: {exc}", file=sys.stderr)
        return 2
    rtf = f"{stats.rtf:.3f}" if stats.rtf is not None else "n/a"
    wall_rtf = f"{stats.wall_rtf:.3f}" if stats.wall_rtf is not None else "n/a"
    first = f"{stats.first_chunk_s * 1000:.1f} ms" if stats.first_chunk_s is not None else "n/a"
    print(
        f"wrote {args.output}: {stats.audio_s:.2f} s at {stats.sample_rate} Hz; first chunk {first}; "
        f"RTF {rtf} (wall - first chunk) / audio, {wall_rtf} wall / audio"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
