"""PatchChunker groups a stream's patches into vocoder windows of 1, 2, 4, ... new patches, each
with the context the decoder reads, and the windows decode to the same audio as one patch at a time,
on every decode path (whole window, trimmed, fast layers)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.cpu.tiny_vae import VAES, tiny_vae
from voxcpm_triton.audio.chunks import PatchChunker, chunk_patches, window_shapes
from voxcpm_triton.audio.vocoder import WindowedVocoder

TOLERANCE = 1e-5


def _engine_windows(patches: np.ndarray, prompt: int, window_patches: int) -> list[np.ndarray]:
    """What the engine emits per step: up to window_patches - 1 patches of context, then the new one.
    The first `prompt` patches stand for the prompt's context patches (never new)."""
    return [patches[max(0, i + 1 - window_patches): i + 1] for i in range(prompt, len(patches))]


def _chunked(patches: np.ndarray, prompt: int, window_patches: int, max_new: int) -> list[tuple[np.ndarray, int]]:
    chunker = PatchChunker(window_patches, max_new)
    windows = _engine_windows(patches, prompt, window_patches)
    out = []
    for index, window in enumerate(windows):
        taken = chunker.feed(window, finished=index == len(windows) - 1)
        if taken is not None:
            out.append(taken)
    return out


def test_chunk_sizes_double_up_to_the_cap() -> None:
    assert [chunk_patches(sent, 4) for sent in range(6)] == [1, 2, 4, 4, 4, 4]
    assert [chunk_patches(sent, 3) for sent in range(4)] == [1, 2, 3, 3]
    assert [chunk_patches(sent, 1) for sent in range(3)] == [1, 1, 1]


@pytest.mark.parametrize("prompt", [0, 2, 5])
@pytest.mark.parametrize("count", [1, 3, 8, 14])
def test_windows_carry_every_patch_once_with_its_context(prompt: int, count: int) -> None:
    window_patches, max_new = 6, 4
    patches = np.arange(prompt + count, dtype=np.float32)[:, None, None] * np.ones((1, 2, 3), np.float32)
    chunks = _chunked(patches, prompt, window_patches, max_new)
    news = [new for _, new in chunks]
    assert sum(news) == count
    assert news[:-1] == [chunk_patches(sent, max_new) for sent in range(len(news) - 1)]
    end = prompt
    for window, new in chunks:
        end += new
        start = max(0, end - (window_patches - 1 + new))
        np.testing.assert_array_equal(window, patches[start:end])


@pytest.mark.parametrize("prompt", [0, 5])
@pytest.mark.parametrize("count", [1, 2, 3, 7, 8, 9, 10, 20])
def test_streams_without_or_with_a_full_prompt_context_replay_graphs(prompt: int, count: int) -> None:
    window_patches, max_new = 6, 4
    patches = np.zeros((prompt + count, 2, 3), np.float32)
    shapes = [(window.shape[0], new) for window, new in _chunked(patches, prompt, window_patches, max_new)]
    graphed = set(window_shapes(window_patches, max_new))
    assert set(shapes[:-1]) <= graphed
    # The last window carries what is left; once the context is full its shape has graphs too.
    assert shapes[-1] in graphed or shapes[-1][0] < window_patches - 1 + shapes[-1][1]


def test_an_output_without_a_patch_flushes_what_waits_when_the_stream_ends() -> None:
    chunker = PatchChunker(6, 4)
    assert chunker.feed(np.ones((1, 2, 3), np.float32), finished=False)[1] == 1
    assert chunker.feed(np.ones((2, 2, 3), np.float32), finished=False) is None
    assert chunker.feed(np.zeros((0, 2, 3), np.float32), finished=False) is None
    window, new = chunker.feed(None, finished=True)
    assert new == 1 and window.shape == (2, 2, 3)


def test_counts_below_one_are_refused() -> None:
    with pytest.raises(ValueError, match="max_new=0"):
        window_shapes(6, 0)
    with pytest.raises(ValueError, match="window_patches=0"):
        PatchChunker(0, 4)


def test_one_new_patch_per_window_is_the_engine_window() -> None:
    patches = np.random.default_rng(0).standard_normal((9, 2, 3)).astype(np.float32)
    chunks = _chunked(patches, 2, 4, 1)
    assert all(new == 1 for _, new in chunks)
    for (window, _), expected in zip(chunks, _engine_windows(patches, 2, 4)):
        np.testing.assert_array_equal(window, expected)


def test_nothing_is_taken_before_the_chunk_is_full() -> None:
    chunker = PatchChunker(6, 4)
    chunker.add(np.zeros((1, 2, 3), np.float32))
    assert chunker.take(final=False)[1] == 1
    chunker.add(np.zeros((2, 2, 3), np.float32))
    assert chunker.take(final=False) is None
    assert chunker.take(final=True)[1] == 1
    assert chunker.take(final=True) is None


@pytest.mark.parametrize("name", sorted(VAES))
@pytest.mark.parametrize("mode", [dict(trim=False), dict(trim=True), dict(trim=True, fast_layers=True)])
def test_chunked_windows_decode_like_one_patch_each(name: str, mode: dict) -> None:
    vae, patch_size = tiny_vae(name, random_biases=True)
    vocoder = WindowedVocoder(vae, patch_size, **mode)
    rng = np.random.default_rng(1)
    patches = rng.standard_normal((2 + 3 * vocoder.window_patches, patch_size, 8)).astype(np.float32)
    single = np.concatenate(vocoder.decode(_engine_windows(patches, 2, vocoder.window_patches)))
    chunks = _chunked(patches, 2, vocoder.window_patches, 4)
    audio = vocoder.decode([window for window, _ in chunks], [new for _, new in chunks])
    for chunk, (_, new) in zip(audio, chunks):
        assert chunk.dtype == np.float32 and chunk.shape == (new * vocoder.samples_per_patch,)
    assert np.abs(np.concatenate(audio) - single).max() <= TOLERANCE


def test_bad_new_patch_counts_are_refused() -> None:
    vocoder = WindowedVocoder(*tiny_vae("v2"))
    window = np.zeros((3, vocoder.patch_size, 8), np.float32)
    for new in (0, 4):
        message = rf"new_patches\[0\] = {new}; allowed 1\.\.3 \(the patches of windows\[0\]\)"
        with pytest.raises(ValueError, match=message):
            vocoder.decode([window], [new])
    with pytest.raises(ValueError, match="1 new_patches for 2 windows"):
        vocoder.decode([window, window], [1])
    too_long = np.zeros((vocoder.window_patches + 2, vocoder.patch_size, 8), np.float32)
    message = rf"windows\[0\] has {len(too_long)} patches for 2 new; at most {len(too_long) - 1}"
    with pytest.raises(ValueError, match=message):
        vocoder.decode([too_long], [2])
