"""Fused ops: each a torch custom op (torch.ops.voxcpm.*) over the CUDA library kernels/ builds,
with a pure-PyTorch reference `<op>_ref` that is also the CPU path. The wrappers below validate
their arguments and run the CUDA kernel on CUDA tensors when the library is loaded, the reference
otherwise (see library.library_status())."""

from voxcpm_triton.ops.cfg_euler import cfg_euler_step, cfg_euler_step_ref
from voxcpm_triton.ops.decode_attention import (decode_attention, decode_attention_ref, rope_decode_attention,
                                               rope_decode_attention_ref, rope_decode_takes)
from voxcpm_triton.ops.fp8_linear import Fp8Weight, fp8_linear, quantize_weight
from voxcpm_triton.ops.fsq import fsq, fsq_ref
from voxcpm_triton.ops.library import library_status
from voxcpm_triton.ops.locdit_sequence import locdit_sequence, locdit_sequence_ref
from voxcpm_triton.ops.rmsnorm import add_rmsnorm, add_rmsnorm_ref, rmsnorm, rmsnorm_ref
from voxcpm_triton.ops.quantize_fp8 import quantize_fp8, quantize_fp8_ref
from voxcpm_triton.ops.rope_kv_write import rope_kv_write, rope_kv_write_ref
from voxcpm_triton.ops.row_scale import row_scale, row_scale_ref
from voxcpm_triton.ops.short_attention import short_attention, short_attention_ref
from voxcpm_triton.ops import skinny_linear
from voxcpm_triton.ops.skinny_linear import (gate_up_swiglu, linear, linear_residual_, normed_gate_up_swiglu,
                                              normed_linear, skinny_gemm, skinny_gemm_ref)
from voxcpm_triton.ops.snake import snake, snake_ref
from voxcpm_triton.ops.step_state import step_gather, step_gather_ref, step_scatter, step_scatter_ref
from voxcpm_triton.ops.snake_depthwise_conv import snake_depthwise_conv, snake_depthwise_conv_ref
from voxcpm_triton.ops.swiglu import swiglu, swiglu_ref

__all__ = [
    "Fp8Weight", "add_rmsnorm", "add_rmsnorm_ref", "cfg_euler_step", "cfg_euler_step_ref", "decode_attention",
    "decode_attention_ref", "fp8_linear", "fsq", "fsq_ref", "gate_up_swiglu", "library_status", "linear",
    "linear_residual_", "locdit_sequence", "locdit_sequence_ref", "normed_gate_up_swiglu", "normed_linear",
    "quantize_fp8", "quantize_fp8_ref", "quantize_weight", "rmsnorm", "rmsnorm_ref", "rope_kv_write",
    "rope_kv_write_ref", "rope_decode_attention", "rope_decode_attention_ref", "rope_decode_takes", "row_scale",
    "row_scale_ref",
    "short_attention", "short_attention_ref", "skinny_gemm", "skinny_gemm_ref", "skinny_linear", "snake",
    "snake_depthwise_conv", "snake_depthwise_conv_ref", "snake_ref", "step_gather", "step_gather_ref", "step_scatter",
    "step_scatter_ref", "swiglu", "swiglu_ref",
]
