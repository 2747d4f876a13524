"""decode_attention's default split count (ops/decode_attention.py splits_for_waves) on the H200's
132 multiprocessors x 2 resident blocks, for VoxCPM2's base LM (2 KV heads, one block per KV head
and split), and the wrapper's validation of an explicit split count."""

from __future__ import annotations

import pytest
import torch

from voxcpm_triton import ops
from voxcpm_triton.ops.decode_attention import DEFAULT_MAX_SPLITS, splits_for_waves

RESIDENT = 2 * 132
BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)


def test_streams_that_fill_the_gpu_take_one_split():
    assert splits_for_waves(2 * 128, RESIDENT) == 1  # 256 blocks: one wave
    assert splits_for_waves(2 * 256, RESIDENT) == 1  # 512 blocks: 1.94 waves, no combine


def test_small_batches_spread_over_the_gpu():
    assert splits_for_waves(2 * 1, RESIDENT) == DEFAULT_MAX_SPLITS
    assert splits_for_waves(2 * 4, RESIDENT) == DEFAULT_MAX_SPLITS
    assert splits_for_waves(2 * 8, RESIDENT) == DEFAULT_MAX_SPLITS  # 16 blocks: an eighth of 132
    assert splits_for_waves(2 * 64, RESIDENT) == 1  # half a wave already: the combine would cost more


def test_an_unsplit_grid_over_an_eighth_of_the_multiprocessors_stays_unsplit():
    # 8-warp blocks at 16-32 streams beat the 4-8 splits the wave model alone would take (run 76)
    assert splits_for_waves(2 * 16, RESIDENT) == 1
    assert splits_for_waves(2 * 32, RESIDENT) == 1


@pytest.mark.parametrize("batch", BUCKETS)
def test_a_split_grid_stays_within_one_wave(batch):
    blocks = 2 * batch
    s = splits_for_waves(blocks, RESIDENT)
    assert 1 <= s <= DEFAULT_MAX_SPLITS
    assert s == 1 or s * blocks <= RESIDENT, (batch, s)


def test_more_streams_never_take_more_splits_on_the_bucket_sizes():
    chosen = [splits_for_waves(2 * batch, RESIDENT) for batch in BUCKETS]
    assert chosen == sorted(chosen, reverse=True)


@pytest.mark.parametrize("num_splits", (0, 257))
def test_split_count_out_of_range_is_named(num_splits):
    q = torch.randn(1, 2, 8)
    cache = torch.randn(1, 1, 4, 8)
    index = torch.zeros(1, dtype=torch.int32)
    with pytest.raises(ValueError, match="num_splits must be in"):
        ops.decode_attention(q, cache, cache, index, index + 4, num_splits=num_splits)
