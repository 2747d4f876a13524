"""decode_attention's two CUDA kernels against the PyTorch reference: the tensor-core kernel (bf16 /
fp16, the default; in blocks of 4 and of 8 warps, VOXCPM_DECODE_ATTENTION_WARPS) and the CUDA-core
one (fp32, and bf16 / fp16 with VOXCPM_DECODE_ATTENTION_MMA=0).

Covered: ragged lengths (0, 1, around the 16-key warp step, past 128, the cache's full length, past
it: clamped), padding rows (slot -1) and unknown slots, shuffled slot ids, 1..64 splits (more splits
than keys included), head_dim 64 and 128, groups of 1, 3, 8, 16, 20 (blocks of 16 heads plus a
partial one) and 32 query heads per KV head, a cache laid out [slots, positions, kv_heads, d] (a
position stride other than head_dim), peaked softmaxes (the online max moving), stale rows past
every live length holding NaN (any read of them poisons the output), and a CUDA graph replayed with
lengths changed after capture.

Tolerances (absolute and relative, per dtype, tests/gpu/op_checks.py): bf16 1.6e-2, fp16 2e-3,
fp32 2e-5. The logits and the softmax are fp32 in both kernels; the tensor-core P.V keeps ~16
mantissa bits of each probability (hi + lo parts), so outputs differ from the reference by about
one final rounding.
"""

from __future__ import annotations

import pytest
import torch

from tests.gpu.op_checks import DEVICE, close
from voxcpm_triton import ops
from voxcpm_triton.ops import library

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
    pytest.mark.usefixtures("no_tf32"),  # the fp32 reference's einsums in full fp32
]

DTYPES = (torch.bfloat16, torch.float16, torch.float32)
SWITCH = "VOXCPM_DECODE_ATTENTION_MMA"
WARPS = "VOXCPM_DECODE_ATTENTION_WARPS"


@pytest.fixture(scope="module", autouse=True)
def kernels_loaded():
    if torch.cuda.is_available():
        assert library.library() is not None, f"kernels library not loaded ({library.library_status()}); " \
                                              "build it with build/build_kernels.sh"


@pytest.fixture(params=("mma4", "mma8", "cuda_core"))
def kernel(request, monkeypatch):
    """Which kernel bf16 / fp16 take (fp32 always takes the CUDA-core one), the tensor-core one in
    blocks of 4 or 8 warps whatever the grid (8 only for groups of <= 8 heads); both switches are
    read on every call."""
    monkeypatch.setenv(SWITCH, "0" if request.param == "cuda_core" else "1")
    monkeypatch.setenv(WARPS, request.param[-1] if request.param != "cuda_core" else "4")
    return request.param


def make_case(dtype: torch.dtype, lengths: list[int], q_heads: int, kv_heads: int, head_dim: int, max_len: int,
              seed: int, q_scale: float = 1.0, position_major: bool = False):
    """Inputs for len(lengths) streams on shuffled slots; lengths[b] == -1 marks a padding row (slot -1)
    and -2 an unknown slot id, both given 50 keys that must be ignored. Rows past each live length
    are NaN."""
    batch = len(lengths)
    slots = batch + 2
    g = torch.Generator(device=DEVICE).manual_seed(seed)
    q = (torch.randn(batch, q_heads, head_dim, generator=g, device=DEVICE) * q_scale).to(dtype)
    shape = (slots, max_len, kv_heads, head_dim) if position_major else (slots, kv_heads, max_len, head_dim)
    k_cache = torch.randn(*shape, generator=g, device=DEVICE).to(dtype)
    v_cache = torch.randn(*shape, generator=g, device=DEVICE).to(dtype)
    if position_major:
        k_cache, v_cache = k_cache.permute(0, 2, 1, 3), v_cache.permute(0, 2, 1, 3)
    slot_ids = torch.randperm(slots, generator=g, device=DEVICE)[:batch].int()
    live = torch.tensor([50 if n < 0 else n for n in lengths], dtype=torch.int32, device=DEVICE)
    for b, n in enumerate(lengths):
        if n == -1:
            slot_ids[b] = -1
        elif n == -2:
            slot_ids[b] = slots + 5
        else:
            k_cache[slot_ids[b], :, min(n, max_len):] = float("nan")
            v_cache[slot_ids[b], :, min(n, max_len):] = float("nan")
    return q, k_cache, v_cache, slot_ids, live


def skip_fp32_twice(kernel: str, dtype: torch.dtype) -> None:
    if dtype == torch.float32 and kernel != "cuda_core":
        pytest.skip("fp32 always runs the CUDA-core kernel (covered by the cuda_core case)")


def check(q, k_cache, v_cache, slot_ids, lengths, num_splits):
    expected = ops.decode_attention_ref(q.float(), k_cache.float(), v_cache.float(), slot_ids, lengths)
    out = ops.decode_attention(q, k_cache, v_cache, slot_ids, lengths, num_splits=num_splits)
    close(out, expected, q.dtype)
    empty = (slot_ids < 0) | (slot_ids >= k_cache.shape[0]) | (lengths <= 0)
    assert torch.equal(out[empty], torch.zeros_like(out[empty]))
    return out


RAGGED = [0, 1, 15, 16, 17, 33, 127, 129, 300, 512, -1, -2, 600]  # 600 > max_len 512: clamped


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("heads", ((16, 2, 128), (16, 2, 64), (12, 4, 128), (16, 16, 64), (32, 2, 64),
                                   (20, 1, 128), (32, 1, 64)))
@pytest.mark.parametrize("num_splits", (1, 2, 3, 7, 16, 64))
def test_ragged_lengths_heads_and_splits(kernel, dtype, heads, num_splits):
    skip_fp32_twice(kernel, dtype)
    q_heads, kv_heads, head_dim = heads
    case = make_case(dtype, RAGGED, q_heads, kv_heads, head_dim, 512, seed=q_heads + head_dim + num_splits)
    check(*case, num_splits)


@pytest.mark.parametrize("dtype", (torch.bfloat16, torch.float16))
@pytest.mark.parametrize("q_scale", (4.0, 12.0))
@pytest.mark.parametrize("num_splits", (1, 5))
def test_peaked_softmax_moves_the_running_max(kernel, dtype, q_scale, num_splits):
    case = make_case(dtype, [700, 1000, 64, 999], 16, 2, 128, 1000, seed=7, q_scale=q_scale)
    check(*case, num_splits)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("num_splits", (1, 4))
def test_position_major_cache_layout(kernel, dtype, num_splits):
    skip_fp32_twice(kernel, dtype)
    case = make_case(dtype, [37, 256, 0, 200, 1], 16, 2, 128, 256, seed=11, position_major=True)
    assert case[1].stride(2) == 2 * 128
    check(*case, num_splits)


@pytest.mark.parametrize("batch", (1, 4, 16, 64, 256))
def test_voxcpm2_shapes_with_the_default_split_count(kernel, batch):
    g = torch.Generator().manual_seed(batch)
    lengths = torch.randint(1, 400, (batch,), generator=g).tolist()
    lengths[0] = 300
    check(*make_case(torch.bfloat16, lengths, 16, 2, 128, 400, seed=batch), None)


@pytest.mark.parametrize("batch", (1, 33, 64, 66, 67, 256))
def test_voxcpm2_shapes_with_the_default_warps_and_splits(monkeypatch, batch):
    # Unforced, the block size follows the grid: 8 warps where one split per stream leaves at most
    # one block per multiprocessor (33-66 streams on a 132-multiprocessor GPU), else 4.
    monkeypatch.delenv(WARPS, raising=False)
    monkeypatch.delenv(SWITCH, raising=False)
    g = torch.Generator().manual_seed(batch + 1)
    lengths = torch.randint(1, 400, (batch,), generator=g).tolist()
    check(*make_case(torch.bfloat16, lengths, 16, 2, 128, 400, seed=batch + 1), None)


@pytest.mark.parametrize("num_splits", (1, 3))
def test_kernels_agree(monkeypatch, num_splits):
    case = make_case(torch.bfloat16, RAGGED, 16, 2, 128, 512, seed=3)
    outs = []
    for mma, warps in (("1", "4"), ("1", "8"), ("0", "4")):
        monkeypatch.setenv(SWITCH, mma)
        monkeypatch.setenv(WARPS, warps)
        outs.append(ops.decode_attention(*case, num_splits=num_splits).float())
    for other in outs[1:]:
        torch.testing.assert_close(other, outs[0], atol=1.6e-2, rtol=1.6e-2)


@pytest.mark.parametrize("num_splits", (1, 6))
def test_graph_replay_follows_lengths_changed_after_capture(kernel, num_splits):
    dtype = torch.bfloat16
    q, k_cache, v_cache, slot_ids, lengths = make_case(dtype, [5, 300, 17, 0, 129, 64], 16, 2, 128, 512, seed=21)
    k_cache = torch.nan_to_num(k_cache)  # replays read further than the first lengths
    v_cache = torch.nan_to_num(v_cache)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        ops.decode_attention(q, k_cache, v_cache, slot_ids, lengths, num_splits=num_splits)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = ops.decode_attention(q, k_cache, v_cache, slot_ids, lengths, num_splits=num_splits)
    for new in ([5, 300, 17, 0, 129, 64], [512, 1, 0, 33, 480, 250], [0, 0, 0, 0, 0, 16]):
        lengths.copy_(torch.tensor(new, dtype=torch.int32))
        graph.replay()
        torch.cuda.synchronize()
        expected = ops.decode_attention_ref(q.float(), k_cache.float(), v_cache.float(), slot_ids, lengths)
        close(out, expected, dtype)


@pytest.mark.parametrize("stride", (134217720, 1 << 27))
def test_position_strides_at_and_past_32_bit_row_offsets(kernel, stride):
    # The tensor-core kernel keeps a lane's row offsets within a 16-key step in 32 bits: up to
    # 134217723 elements per position; larger strides take the CUDA-core kernel.
    dtype = torch.bfloat16
    g = torch.Generator(device=DEVICE).manual_seed(5)

    def cache():  # 16 rows `stride` elements apart: 4 GB of storage, only the rows written
        view = torch.empty(15 * stride + 128, dtype=dtype, device=DEVICE).as_strided(
            (1, 1, 16, 128), (16 * stride, 16 * stride, stride, 1))
        view.copy_(torch.randn(1, 1, 16, 128, generator=g, device=DEVICE))
        return view

    k_cache, v_cache = cache(), cache()
    q = torch.randn(1, 8, 128, generator=g, device=DEVICE).to(dtype)
    index = torch.zeros(1, dtype=torch.int32, device=DEVICE)
    check(q, k_cache, v_cache, index, index + 16, 1)
