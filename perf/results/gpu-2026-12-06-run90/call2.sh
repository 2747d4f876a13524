# Run 90, call 2, on call 1's warm machine (its campaign setup is kept): `bash call2.sh triton` after an
# H200's profile, `bash call2.sh nano` where call 1 served already (Nano-vLLM-VoxCPM on the same GPU,
# same checkpoint, texts, forced length and levels). The report merges whatever the machine holds.
# carry: as call 1.
set -u
source perf/device_call_env.sh
unset PYTHONPATH VOXCPM_KERNELS_LIB
LEVELS=1,4,16,64,256 CAMPAIGN_BUDGET_S=560 OUT=$OUT/$1 bash perf/gpu_campaign.sh "$1" | tail -1
at "$1" $?
sed -n '/^| /p' $OUT/$1/summary.md 2>/dev/null | head -40
