"""The prefetch_l2 kernel: accepted ranges launch (eagerly and inside a CUDA graph) and change no
byte anywhere; a misaligned range is refused by the C ABI; a LocDiT stack gives bit-identical
output with and without its weight prefetches."""

from __future__ import annotations

import pytest
import torch

from voxcpm_triton import ops
from voxcpm_triton.checkpoint.make import config_dict
from voxcpm_triton.config import parse_config
from voxcpm_triton.model import fast_path
from voxcpm_triton.model.voxcpm import build_model
from voxcpm_triton.ops import library

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]


@pytest.mark.parametrize("sizes", [(1,), (8, 3), (40 << 20,), (16384, 16385, 7, 5000)])
def test_prefetch_changes_nothing(sizes):
    tensors = [torch.randint(0, 255, (n,), dtype=torch.uint8, device="cuda") for n in sizes]
    before = [t.clone() for t in tensors]
    ops.prefetch_l2(tensors, 1 << 30)
    ops.prefetch_l2(tensors, 20)
    torch.cuda.synchronize()
    assert all(torch.equal(a, b) for a, b in zip(tensors, before))


def test_prefetch_replays_in_a_cuda_graph():
    weight = torch.randn(4096, 1024, device="cuda", dtype=torch.bfloat16)
    x = torch.randn(22, 1024, device="cuda", dtype=torch.bfloat16)
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):  # warm-up off the default stream, as capture requires
        ops.prefetch_l2([weight], weight.numel() * 2)
        torch.nn.functional.linear(x, weight)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        ops.prefetch_l2([weight], weight.numel() * 2)
        out = torch.nn.functional.linear(x, weight)
    x.copy_(torch.randn_like(x))
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(out, torch.nn.functional.linear(x, weight))


def test_c_abi_refuses_misaligned_and_negative_ranges():
    lib = library.library()
    if lib is None:
        pytest.skip(library.library_status())
    buffer = torch.zeros(64, dtype=torch.uint8, device="cuda")
    stream = library.stream_of(buffer)
    assert lib.voxcpm_prefetch_l2(buffer.data_ptr() + 8, 16, None, 0, None, 0, None, 0, stream) == 1
    assert lib.voxcpm_prefetch_l2(buffer.data_ptr(), -16, None, 0, None, 0, None, 0, stream) == 1
    assert lib.voxcpm_prefetch_l2(None, 16, None, 0, None, 0, None, 0, stream) == 1
    assert lib.voxcpm_prefetch_l2(None, 0, None, 0, None, 0, None, 0, stream) == 0


def test_locdit_output_identical_with_and_without_prefetch():
    raw = config_dict("voxcpm2", "full")
    raw["dit_config"]["num_layers"] = 3
    torch.manual_seed(0)
    with torch.device("cuda"):
        dit = build_model(parse_config(raw)).to(torch.bfloat16).eval().feat_decoder.estimator.decoder
    fast_path.enable_custom_ops(dit, True)
    x = torch.randn(2, 11, dit.config.hidden_size, device="cuda", dtype=torch.bfloat16)
    outputs = []
    for rows in (0, 64):
        dit.prefetch_rows, dit.prefetch_bytes = rows, 40 << 20
        outputs.append(dit(x, causal=False)[0])
    assert torch.equal(outputs[0], outputs[1])
