"""The short_attention CUDA kernel against its PyTorch reference and against the path it replaces in
the model (rope_kv_write, then SDPA), on LocEnc / LocDiT shapes: 1..512 sequences of 1..32 tokens,
16 q / 2 kv heads of 64 (VoxCPM2) or 128, plain multi-head and odd group sizes, with and without
RoPE, causal and not, in bf16, fp16 and fp32; inside a replayed CUDA graph; a sequence's output is
bit-identical whatever else is in the batch (the launch's heads-per-block changes with the batch); it
compiles with torch.compile(fullgraph=True).

Tolerances (absolute and relative, per dtype): bf16 1.6e-2 (two bf16 ulps near 1), fp16 2e-3,
fp32 2e-5. The kernel and the reference round rotated q and k identically and compute the logits and
softmax in fp32; in bf16 / fp16 the tensor-core weighted sum keeps ~16 mantissa bits of each
probability (hi + lo parts), far below one output ulp, so they differ by about one final rounding.
Against cuDNN/flash SDPA (which rounds the probabilities to bf16 before the weighted sum) the bf16
bound is the same.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from tests.gpu.op_checks import DEVICE, close
from voxcpm_triton import ops
from voxcpm_triton.ops import library

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
    pytest.mark.usefixtures("no_tf32"),  # the fp32 reference's matmuls in full fp32
]

DTYPES = (torch.bfloat16, torch.float16, torch.float32)


@pytest.fixture(scope="module", autouse=True)
def kernels_loaded():
    if torch.cuda.is_available():
        assert library.library() is not None, f"kernels library not loaded ({library.library_status()}); " \
                                              "build it with build/build_kernels.sh"


def make_qkv(sequences: int, seq_len: int, q_heads: int, kv_heads: int, head_dim: int, dtype: torch.dtype,
             seed: int) -> torch.Tensor:
    g = torch.Generator(device=DEVICE).manual_seed(seed)
    shape = (sequences * seq_len, (q_heads + 2 * kv_heads) * head_dim)
    return (torch.randn(*shape, generator=g, device=DEVICE) * 1.5).to(dtype)


def longrope_like_tables(positions: int, head_dim: int) -> tuple[torch.Tensor, torch.Tensor]:
    inv_freq = 1.0 / (10000 ** (torch.arange(0, head_dim, 2, device=DEVICE).float() / head_dim))
    divisors = torch.linspace(1.0, 40.0, head_dim // 2, device=DEVICE)
    angles = torch.outer(torch.arange(positions, device=DEVICE).float(), 1.0 / divisors) * inv_freq
    angles = torch.cat((angles, angles), dim=-1)
    factor = math.sqrt(1 + math.log(4) / math.log(8192))
    return (angles.cos() * factor).contiguous(), (angles.sin() * factor).contiguous()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("head_dim", (64, 128))
@pytest.mark.parametrize("seq_len", (1, 4, 5, 9, 11, 16, 17, 32))
@pytest.mark.parametrize("sequences", (1, 2, 128, 512))
def test_kernel_matches_reference_gqa_with_rope(dtype, head_dim, seq_len, sequences):
    q_heads, kv_heads = 16, 2
    qkv = make_qkv(sequences, seq_len, q_heads, kv_heads, head_dim, dtype, seed=seq_len)
    cos, sin = longrope_like_tables(seq_len + 2, head_dim)
    out = ops.short_attention(qkv, seq_len, q_heads, kv_heads, cos, sin)
    assert out.shape == (sequences * seq_len, q_heads * head_dim) and out.dtype == dtype
    close(out, ops.short_attention_ref(qkv, seq_len, q_heads, kv_heads, cos, sin), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("q_heads", "kv_heads"), ((8, 8), (12, 4), (6, 1), (16, 2)))
@pytest.mark.parametrize("rope", (True, False))
@pytest.mark.parametrize("causal", (False, True))
def test_kernel_head_groups_rope_and_causal(dtype, q_heads, kv_heads, rope, causal):
    seq_len, head_dim, sequences = 11, 64, 37
    qkv = make_qkv(sequences, seq_len, q_heads, kv_heads, head_dim, dtype, seed=q_heads + kv_heads)
    cos, sin = longrope_like_tables(seq_len, head_dim) if rope else (None, None)
    out = ops.short_attention(qkv, seq_len, q_heads, kv_heads, cos, sin, scale=0.11, causal=causal)
    close(out, ops.short_attention_ref(qkv, seq_len, q_heads, kv_heads, cos, sin, scale=0.11, causal=causal), dtype)


@pytest.mark.parametrize("dtype", (torch.bfloat16, torch.float16))
@pytest.mark.parametrize("rope", (True, False))
@pytest.mark.parametrize("causal", (False, True))
@pytest.mark.parametrize(("sequences", "seq_len"), ((20, 11), (30, 11), (40, 9), (45, 13), (70, 14), (70, 16),
                                                     (128, 11), (70, 17), (512, 11), (512, 4)))
def test_tensor_core_kernel_block_shapes(dtype, rope, causal, sequences, seq_len):
    """LocDiT's 16 q / 2 kv heads of 128 at batches whose blocks take each count of query tiles the
    tensor-core kernel picks. On a 132-SM H200: blocks of 1, 2, 3 (a last chunk of 2) and 4 (+ 3) tiles
    in 8 warps, 7 and 8 tiles in 10 (their staging threads taking 1 or 2 items), 6 tiles in 9 (128
    sequences, 64 streams); then grids of over 2 blocks per SM, whose blocks have a warp per tile but at
    least 4: 5 (+ 4) tiles in 5 warps, 6 in 6 (512 sequences, 256 streams), 2 in 4. Staging threads take
    1, 2 or 3 rows of a token among these shapes. Warps without a tile leave after the staging."""
    q_heads, kv_heads, head_dim = 16, 2, 128
    qkv = make_qkv(sequences, seq_len, q_heads, kv_heads, head_dim, dtype, seed=sequences + seq_len)
    cos, sin = longrope_like_tables(seq_len, head_dim) if rope else (None, None)
    out = ops.short_attention(qkv, seq_len, q_heads, kv_heads, cos, sin, causal=causal)
    close(out, ops.short_attention_ref(qkv, seq_len, q_heads, kv_heads, cos, sin, causal=causal), dtype)


@pytest.mark.parametrize("seq_len", (5, 11))
def test_kernel_matches_the_rope_kv_write_and_sdpa_path_it_replaces(seq_len):
    dtype = torch.bfloat16
    sequences, q_heads, kv_heads, head_dim = 128, 16, 2, 64
    qkv = make_qkv(sequences, seq_len, q_heads, kv_heads, head_dim, dtype, seed=3)
    cos, sin = longrope_like_tables(seq_len, head_dim)
    tokens = sequences * seq_len
    heads = qkv.view(tokens, q_heads + 2 * kv_heads, head_dim)
    no_cache = torch.zeros(1, kv_heads, 1, head_dim, device=DEVICE, dtype=dtype)
    positions = torch.arange(seq_len, device=DEVICE, dtype=torch.int32).repeat(sequences)
    rotated = ops.rope_kv_write(heads[:, :q_heads + kv_heads], heads[:, q_heads:q_heads + kv_heads],
                                heads[:, q_heads + kv_heads:], no_cache, no_cache.clone(), positions,
                                torch.full_like(positions, -1), cos, sin)
    q = rotated[:, :q_heads].view(sequences, seq_len, q_heads, head_dim).transpose(1, 2)
    k = rotated[:, q_heads:].view(sequences, seq_len, kv_heads, head_dim).transpose(1, 2)
    v = heads[:, q_heads + kv_heads:].reshape(sequences, seq_len, kv_heads, head_dim).transpose(1, 2)
    expected = F.scaled_dot_product_attention(q, k, v, enable_gqa=True).transpose(1, 2).reshape(tokens, -1)
    close(ops.short_attention(qkv, seq_len, q_heads, kv_heads, cos, sin), expected, dtype)


def test_a_sequence_gives_the_same_bits_in_any_batch():
    seq_len, q_heads, kv_heads, head_dim = 11, 16, 2, 64
    batch = make_qkv(300, seq_len, q_heads, kv_heads, head_dim, torch.bfloat16, seed=4)
    cos, sin = longrope_like_tables(seq_len, head_dim)
    together = ops.short_attention(batch, seq_len, q_heads, kv_heads, cos, sin)
    for index in (0, 151, 299):
        rows = slice(index * seq_len, (index + 1) * seq_len)
        alone = ops.short_attention(batch[rows].clone(), seq_len, q_heads, kv_heads, cos, sin)
        assert torch.equal(alone, together[rows]), f"sequence {index} differs alone and in a batch of 300"


def test_replay_in_a_cuda_graph_equals_eager():
    seq_len, q_heads, kv_heads, head_dim, sequences = 11, 16, 2, 64, 64
    cos, sin = longrope_like_tables(seq_len, head_dim)
    static = make_qkv(sequences, seq_len, q_heads, kv_heads, head_dim, torch.bfloat16, seed=5)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up outside capture, as CUDA-graph capture requires
        ops.short_attention(static, seq_len, q_heads, kv_heads, cos, sin)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        graphed = ops.short_attention(static, seq_len, q_heads, kv_heads, cos, sin)
    for seed in (6, 7):
        static.copy_(make_qkv(sequences, seq_len, q_heads, kv_heads, head_dim, torch.bfloat16, seed=seed))
        graph.replay()
        eager = ops.short_attention(static, seq_len, q_heads, kv_heads, cos, sin)
        assert torch.equal(graphed, eager), f"replay with seed {seed} differs from eager"


def test_gpu_validation_names_head_dim_and_alignment():
    qkv = make_qkv(2, 4, 4, 2, 32, torch.bfloat16, seed=8)
    with pytest.raises(ValueError, match="head_dim must be 64 or 128 on the GPU"):
        ops.short_attention(qkv, 4, 4, 2)
    flat = torch.zeros(8 * 8 * 64 + 1, device=DEVICE, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="qkv must start on a 16-byte boundary"):
        ops.short_attention(flat[1:].view(8, 8 * 64), 4, 4, 2)


def test_compiles_with_fullgraph():
    seq_len, q_heads, kv_heads, head_dim = 5, 16, 2, 64
    cos, sin = longrope_like_tables(seq_len, head_dim)
    qkv = make_qkv(9, seq_len, q_heads, kv_heads, head_dim, torch.bfloat16, seed=9)

    def attend(qkv: torch.Tensor) -> torch.Tensor:
        return ops.short_attention(qkv, seq_len, q_heads, kv_heads, cos, sin) * 2

    assert torch.equal(torch.compile(attend, fullgraph=True)(qkv), attend(qkv))
