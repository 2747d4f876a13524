"""Decoder layers of a few rows with each RMSNorm inside the GEMM that reads it and the residual
adds inside o_proj's and down_proj's (skinny_gemm's ROW_RMS and RESIDUAL options) against the
same layers with add_rmsnorm kernels, both in bf16, each measured against the float32 layers.
Model: VoxCPM2's real widths and head sizes with two layers per stack, random norm gains."""

from __future__ import annotations

import pytest
import torch

from tests.gpu.op_checks import DEVICE, randn
from tests.gpu.test_graph_runner import slim_voxcpm2
from voxcpm_triton.model.fast_path import enable_custom_ops
from voxcpm_triton.model.minicpm import MiniCPMModel
from voxcpm_triton.model.rms_norm import RMSNorm
from voxcpm_triton.ops import library, skinny_linear

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
    pytest.mark.usefixtures("no_tf32"),
]


def exact_and_fast_models() -> tuple[torch.nn.Module, torch.nn.Module]:
    """A float32 slim VoxCPM2 whose norm weights are drawn from [0.5, 1.5] (at their initial ones,
    folding them into a GEMM would change nothing), and its bf16 copy with custom ops."""
    exact = slim_voxcpm2(torch.float32)
    generator = torch.Generator(device=DEVICE).manual_seed(3)
    for module in exact.modules():
        if isinstance(module, RMSNorm):
            module.weight.data.uniform_(0.5, 1.5, generator=generator)
    fast = slim_voxcpm2(torch.bfloat16)
    fast.load_state_dict({name: value.to(torch.bfloat16) for name, value in exact.state_dict().items()})
    enable_custom_ops(fast, True)
    return exact, fast


@pytest.fixture(scope="module")
def models() -> tuple[torch.nn.Module, torch.nn.Module]:
    assert library.library() is not None, f"kernels library not loaded ({library.library_status()})"
    return exact_and_fast_models()


def errors(monkeypatch, exact: MiniCPMModel, fast: MiniCPMModel, x: torch.Tensor, rows: slice | None):
    """max |bf16 - fp32| of the stack's output with the norms in the GEMMs and with add_rmsnorm."""
    reference, _ = exact(x.float(), causal=False, rows=rows)
    found = {}
    for norms in ("1", "0"):
        monkeypatch.setenv("VOXCPM_SKINNY_NORMS", norms)
        assert skinny_linear.takes_normed(x, fast.layers[0].self_attn.qkv_weight) == (norms == "1")
        out, _ = fast(x, causal=False, rows=rows)
        assert out.shape == reference.shape
        found[norms] = (out.float() - reference).abs().max().item()
    return found["1"], found["0"], reference.abs().max().item()


@pytest.mark.parametrize("stack", ("dit", "encoder"))
@pytest.mark.parametrize("rows", (None, slice(2, 5)))
def test_normed_layers_are_as_close_to_fp32_as_the_add_rmsnorm_path(monkeypatch, models, stack, rows):
    exact, fast = models
    pick = {"dit": lambda model: model.feat_decoder.estimator.decoder,
            "encoder": lambda model: model.feat_encoder.encoder}
    hidden = pick[stack](exact).config.hidden_size
    length = 11 if stack == "dit" else 5
    x = randn(2, length, hidden, dtype=torch.bfloat16, seed=7)
    normed, kernels, scale = errors(monkeypatch, pick[stack](exact), pick[stack](fast), x, rows)
    print(f"{stack}: max |error| with the norms in the GEMMs {normed:.3g}, with add_rmsnorm {kernels:.3g}, "
          f"output scale {scale:.3g}")
    assert normed <= 1.5 * kernels + 0.01 * scale
