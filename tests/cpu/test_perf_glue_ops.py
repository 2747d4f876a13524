"""glue_ops lists the plain PyTorch ops a model function issues, with its call site, and leaves out
those inside a custom op."""

from __future__ import annotations

import torch
from torch.profiler import ProfilerActivity, profile

from perf.glue_ops import glue_events
from voxcpm_triton import ops
from voxcpm_triton.model.local_dit import timestep_embedding


def test_plain_ops_listed_with_their_model_line_custom_ops_left_out():
    with profile(activities=[ProfilerActivity.CPU], with_stack=True, record_shapes=True) as prof:
        ops.fsq(torch.randn(4, 16), 9.0)  # on the CPU its reference's tanh and round run inside voxcpm::fsq
        timestep_embedding(torch.rand(3), 8)
    counts = glue_events(prof, on_device=False)
    names = {name for name, _, _ in counts}
    assert {"aten::cat", "aten::sin", "aten::cos"} <= names
    assert not names & {"aten::tanh", "aten::round"}
    sites = [site for (name, _, site), _ in counts.items() if name == "aten::cat"]
    assert any(site.startswith("model/local_dit.py") and "timestep_embedding" in site for site in sites), sites
