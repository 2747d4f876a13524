"""Inputs at the edges of what the CUDA ops take, on the GPU: empty tensors (whose data pointer may be
null, which the C entry points refuse) run the reference and give empty results; a norm weight that
is not 16-byte aligned sends a normed GEMM to the separate kernels instead of an error; a C entry
point refuses a workspace its kernel would store to misaligned."""

from __future__ import annotations

import pytest
import torch

from tests.gpu.op_checks import DEVICE, close, randn
from voxcpm_triton import ops
from voxcpm_triton.ops import library as lib

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

BF16 = torch.bfloat16


def test_empty_tensors_give_empty_results():
    x = torch.empty(0, 1024, dtype=BF16, device=DEVICE)
    weight = torch.ones(1024, dtype=BF16, device=DEVICE)
    assert ops.rmsnorm(x, weight, 1e-6).shape == (0, 1024)
    assert ops.add_rmsnorm(x, torch.empty_like(x), weight, 1e-6).shape == (0, 1024)
    assert ops.swiglu(torch.empty(0, 2048, dtype=BF16, device=DEVICE)).shape == (0, 1024)
    assert ops.row_scale(x, 1e-6).shape == (0,)
    none = torch.empty(0, dtype=torch.int32, device=DEVICE)
    cache = torch.zeros(2, 2, 16, 128, dtype=BF16, device=DEVICE)
    q = torch.empty(0, 16, 128, dtype=BF16, device=DEVICE)
    assert ops.decode_attention(q, cache, cache, none, none).shape == (0, 16, 128)
    kv = torch.empty(0, 2, 128, dtype=BF16, device=DEVICE)
    assert ops.rope_kv_write(q, kv, kv, cache, cache.clone(), none, none).shape == (0, 16, 128)


def test_a_misaligned_norm_weight_takes_the_separate_kernels():
    x, weight = randn(4, 1024, dtype=BF16, seed=1), randn(2048, 1024, dtype=BF16, seed=2, scale=0.03)
    norm = torch.empty(1025, dtype=BF16, device=DEVICE)[1:]  # contiguous, 2 bytes past 16-byte alignment
    norm.copy_(randn(1024, dtype=BF16, seed=3))
    assert norm.data_ptr() % 16 != 0
    expected = torch.nn.functional.linear(ops.rmsnorm(x, norm.clone(), 1e-6), weight)
    close(ops.normed_linear(x, weight, norm, 1e-6), expected, BF16)


def test_a_norm_too_wide_for_the_kernel_takes_the_separate_kernels():
    # 32 rows with k = 8192: the gain would not fit beside the 25-32-row kernel's shared memory.
    x, weight = randn(32, 8192, dtype=BF16, seed=4), randn(1024, 8192, dtype=BF16, seed=5, scale=0.01)
    norm = randn(8192, dtype=BF16, seed=6)
    expected = torch.nn.functional.linear(ops.rmsnorm(x, norm, 1e-6), weight)
    close(ops.normed_linear(x, weight, norm, 1e-6), expected, BF16)


def test_decode_attention_refuses_a_misaligned_workspace():
    # The Python wrapper always passes an aligned one; another caller of the C ABI may not.
    kernels = lib.library()
    if kernels is None:
        pytest.skip("kernels library not loaded")
    batch, q_heads, kv_heads, head_dim, splits = 2, 16, 2, 128, 4
    q = randn(batch, q_heads, head_dim, dtype=BF16, seed=7)
    cache = randn(4, kv_heads, 64, head_dim, dtype=BF16, seed=8)
    slots = torch.tensor([0, 1], dtype=torch.int32, device=DEVICE)
    lengths = torch.tensor([5, 64], dtype=torch.int32, device=DEVICE)
    out = torch.empty_like(q)
    nbytes = kernels.voxcpm_decode_attention_workspace_bytes(batch, q_heads, head_dim, splits)
    workspace = torch.empty(nbytes + 16, dtype=torch.uint8, device=DEVICE)

    def call(offset: int) -> int:
        error = kernels.voxcpm_decode_attention(
            lib.ptr(q), lib.ptr(cache), lib.ptr(cache), cache.stride(0), cache.stride(1), cache.stride(2),
            cache.shape[0], cache.shape[2], lib.ptr(slots), lib.ptr(lengths), lib.ptr(out),
            lib.ptr(workspace) + offset, nbytes, batch, q_heads, kv_heads, head_dim, splits,
            head_dim ** -0.5, lib.dtype_code(q), lib.stream_of(q))
        torch.cuda.synchronize()
        return error

    assert call(4) == 1  # VOXCPM_ERROR_INVALID_ARGUMENT
    assert call(0) == 0
    expected = ops.decode_attention_ref(q.float(), cache.float(), cache.float(), slots, lengths)
    close(out, expected, BF16)
