# Run 90, call 3, on the warm machine of calls 1-2: the official PyTorch pipeline (voxcpm 2.0.3,
# torch.compile) at 1, 4 and 16 streams, then the served stack under CUDA MPS at run 47's levels
# (VOXCPM_MPS=1, which also turns on the decoder's launch-ahead). carry: as call 1.
set -u
bash perf/results/gpu-2026-12-06-run90/call2.sh reference
source perf/device_call_env.sh
unset PYTHONPATH VOXCPM_KERNELS_LIB
VOXCPM_MPS=1 LEVELS=1,4,16,64,256 CAMPAIGN_BUDGET_S=300 OUT=$OUT/mps bash perf/gpu_campaign.sh triton | tail -1
at mps $?
sed -n '/^| /p' $OUT/mps/summary.md 2>/dev/null | head -8
