"""locdit_sequence's reference: each sequence holds its branch's mu tokens, the time token, its
stream's condition and noisy patch, in that order; bad shapes are refused by name."""

from __future__ import annotations

import pytest
import torch

from voxcpm_triton import ops


def _parts(batch: int, mu_tokens: int, cond_tokens: int, patch: int, hidden: int):
    g = torch.Generator().manual_seed(batch * 100 + hidden)
    return (torch.randn(2, batch, mu_tokens * hidden, generator=g), torch.randn(hidden, generator=g),
            torch.randn(batch, cond_tokens, hidden, generator=g), torch.randn(batch, patch, hidden, generator=g))


@pytest.mark.parametrize(("batch", "mu_tokens", "cond_tokens", "patch", "hidden"), ((1, 2, 4, 4, 8), (3, 2, 2, 3, 5)))
def test_each_sequence_is_its_branch_mu_then_time_cond_and_patch(batch, mu_tokens, cond_tokens, patch, hidden):
    mu_pair, time, cond, x = _parts(batch, mu_tokens, cond_tokens, patch, hidden)
    out = ops.locdit_sequence(mu_pair, time, cond, x)
    assert out.shape == (2 * batch, mu_tokens + 1 + cond_tokens + patch, hidden)
    for branch in range(2):
        for stream in range(batch):
            expected = torch.cat((mu_pair[branch, stream].view(mu_tokens, hidden), time.view(1, hidden), cond[stream],
                                  x[stream]))
            assert torch.equal(out[branch * batch + stream], expected)


def test_custom_op_schema_and_fake_implementation():
    torch.library.opcheck(torch.ops.voxcpm.locdit_sequence, _parts(2, 2, 4, 4, 8),
                          test_utils=("test_schema", "test_autograd_registration", "test_faketensor"))


def test_bad_shapes_are_refused_by_name():
    mu_pair, time, cond, x = _parts(2, 2, 4, 4, 8)
    with pytest.raises(ValueError, match="mu_pair must be"):
        ops.locdit_sequence(mu_pair[:, :1], time, cond, x)
    with pytest.raises(ValueError, match="time must be"):
        ops.locdit_sequence(mu_pair, time[:7], cond, x)
    with pytest.raises(ValueError, match="cond must be"):
        ops.locdit_sequence(mu_pair, time, cond[:1], x)
    with pytest.raises(ValueError, match="cond must be contiguous"):
        ops.locdit_sequence(mu_pair, time, cond.transpose(0, 1).contiguous().transpose(0, 1), x)
    with pytest.raises(ValueError, match="x must be a non-empty"):
        ops.locdit_sequence(mu_pair, time, cond, x[:0])
