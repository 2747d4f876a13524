"""step_gather / step_scatter (ops/step_state.py) against their references on the GPU: bit for bit,
in every dtype, on VoxCPM2's state shapes (hidden 2048, patch 4 x feat 64) and on rows that are
not whole 16-byte vectors, and replayed in a CUDA graph."""

from __future__ import annotations

import pytest
import torch

from tests.gpu.op_checks import DEVICE, randn
from voxcpm_triton import ops
from voxcpm_triton.ops import library

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

SLOTS = 12  # tables of 13 rows, the last the scratch slot


@pytest.fixture(scope="module", autouse=True)
def kernels_loaded():
    if not library.kernels_loaded():
        pytest.skip(f"kernels library not loaded: {library.library_status()}")


def tables(dtype: torch.dtype, hidden: int, patch: int, feat: int, block: int = 5) -> dict[str, torch.Tensor]:
    rows = SLOTS + 1
    return {
        "ring": randn(rows, block, feat, patch, dtype=dtype, seed=1),
        "lm_hidden": randn(rows, hidden, dtype=dtype, seed=2),
        "residual_hidden": randn(rows, hidden, dtype=dtype, seed=3),
        "prev_patch": randn(rows, patch, feat, dtype=dtype, seed=4),
        "cfg_value": randn(rows, dtype=torch.float32, seed=5).abs(),
        # Seeded: the scatter test compares two tables() built apart, slots it does not write included.
        "positions": torch.randint(0, 900, (rows,), generator=torch.Generator().manual_seed(6)).to(DEVICE)
        .index_fill_(0, torch.tensor([SLOTS], device=DEVICE), 0),
    }


def batch_index(batch: int, block: int = 5) -> torch.Tensor:
    """Distinct slots in a shuffled order, then padding rows on the scratch slot."""
    live = min(batch, SLOTS)
    slots = torch.cat((torch.randperm(SLOTS, generator=torch.Generator().manual_seed(batch))[:live],
                       torch.full((batch - live,), SLOTS)))
    return torch.stack((slots, torch.arange(batch) % block)).to(DEVICE)


GATHER_ARGS = ("ring", "lm_hidden", "residual_hidden", "prev_patch", "cfg_value", "positions")


@pytest.mark.parametrize("dtype", (torch.bfloat16, torch.float16, torch.float32))
@pytest.mark.parametrize("hidden,patch,feat", [(2048, 4, 64), (1001, 3, 7)])
@pytest.mark.parametrize("batch", (1, 9, 16))
def test_step_gather_is_the_reference_indexing(dtype, hidden, patch, feat, batch):
    state = tables(dtype, hidden, patch, feat)
    index = batch_index(batch)
    args = [state[name] for name in GATHER_ARGS]
    for got, expected in zip(ops.step_gather(index, *args), ops.step_gather_ref(index, *args)):
        assert got.dtype == expected.dtype and torch.equal(got, expected)


@pytest.mark.parametrize("dtype", (torch.bfloat16, torch.float16, torch.float32))
@pytest.mark.parametrize("hidden,patch,feat", [(2048, 4, 64), (1001, 3, 7)])
@pytest.mark.parametrize("batch", (1, 9, 16))
def test_step_scatter_is_the_reference_indexing(dtype, hidden, patch, feat, batch):
    index = batch_index(batch)
    lengths = torch.randint(1, 900, (batch,), device=DEVICE, dtype=torch.int32)
    results = (randn(batch, hidden, dtype=dtype, seed=5), randn(batch, hidden, dtype=dtype, seed=6),
               randn(batch, patch, feat, dtype=dtype, seed=7), randn(batch, 2, dtype=dtype, seed=8))
    stop_logits = results[3]
    stop_logits[0, 1] = float("nan")  # argmax takes NaN as the maximum
    if batch > 1:
        stop_logits[1] = stop_logits[1, 0]  # a tie: the first index
    kernel_state, reference_state = (tables(dtype, hidden, patch, feat) for _ in range(2))
    names = ("lm_hidden", "residual_hidden", "prev_patch", "positions")
    got = ops.step_scatter(index, lengths, *results, *(kernel_state[n] for n in names))
    expected = ops.step_scatter_ref(index, lengths, *results, *(reference_state[n] for n in names))
    assert torch.equal(got, expected)
    assert got[0, -1] == 1 and (batch == 1 or got[1, -1] == 0)
    # Padding rows all write the scratch slot: which of them wins is unspecified.
    for name in names:
        assert torch.equal(kernel_state[name][:SLOTS], reference_state[name][:SLOTS]), name
    assert kernel_state["positions"][SLOTS] == 0


# The references are the runner's path without the kernels, so they must capture too.
@pytest.mark.parametrize("gather,scatter", [(ops.step_gather, ops.step_scatter),
                                            (ops.step_gather_ref, ops.step_scatter_ref)], ids=("ops", "references"))
def test_a_graphed_gather_and_scatter_read_and_write_the_current_tables(gather, scatter):
    dtype, batch = torch.bfloat16, 8
    state = tables(dtype, 2048, 4, 64)
    index = batch_index(batch)
    gather(index, *(state[name] for name in GATHER_ARGS))  # loads the library outside the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        noise, lm, residual, prev, cfg, kernel_index = gather(index, *(state[name] for name in GATHER_ARGS))
        out = scatter(index, kernel_index[2], residual, lm, noise, lm[:, :2].contiguous(), state["lm_hidden"],
                      state["residual_hidden"], state["prev_patch"], state["positions"])
    expected = {name: t.clone() for name, t in state.items()}
    index.copy_(batch_index(batch + 3)[:, 3:])
    graph.replay()
    torch.cuda.synchronize()
    gathered = ops.step_gather_ref(index, *(expected[name] for name in GATHER_ARGS))
    assert torch.equal(torch.stack((noise, prev)), torch.stack(gathered[::3]))
    reference_out = ops.step_scatter_ref(index, gathered[5][2], gathered[2], gathered[1], gathered[0],
                                         gathered[1][:, :2].contiguous(), expected["lm_hidden"],
                                         expected["residual_hidden"], expected["prev_patch"], expected["positions"])
    assert torch.equal(out, reference_out)
    for name in ("lm_hidden", "residual_hidden", "prev_patch", "positions"):
        assert torch.equal(state[name][:SLOTS], expected[name][:SLOTS]), name
