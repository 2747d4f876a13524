# Run 134 (one call, ~9 minutes). On an H200 first: issue 5's step figures on main (none since run
# 94; runs 95-133 changed the kernels). Then, on any card: the served stack's back-pressure gate,
# main against cecbb82 (before 760c746 and 25bdd5f: the vocoder's busy stamps and each counter
# slot's owner PID, which the gate reads every step), in turns main, base, main, base while time is
# left, each `LEVELS=64,256 PA_LEVELS=" " bash perf/gpu_campaign.sh triton` on one server start.
# The base arm swaps in cecbb82's voxcpm_triton/ and model_repository/ from
# build/out/session/trees/base.tar.xz (`git archive cecbb82 voxcpm_triton model_repository | xz -9`:
# the carry's 64 MiB hold little more than the bundle); perf/ and build/ stay main's
# (build/tritonserver.sh differs only in a comment).
# carry: ["build/out/session/lib.so.xz", "build/out/session/commit", "build/out/session/trees",
#         "build/out/device"]
# ARM_LEVELS (64,256) for a CPU dry run with CAMPAIGN_DEVICE=cpu CAMPAIGN_SIZE=tiny.
set -u; LIMIT=${LIMIT:-560}
source perf/device_call_env.sh
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  VOXCPM_LT_CACHE=/tmp/r134_lt.json timeout 220 $P perf/profile_step.py --out $OUT/step --batches 1,64,256 \
    --modes graph_ops --profile-batches 64 > $OUT/step.log 2>&1; at step $?
  cat $OUT/step/profile_step.md 2>/dev/null || tail -20 $OUT/step.log
fi
unset PYTHONPATH VOXCPM_KERNELS_LIB
rm -f build/out/lt_cache.json
OUT=$OUT/setup bash perf/gpu_campaign.sh setup > /dev/null 2>&1; at setup $?
mkdir -p /tmp/main_tree /tmp/base_tree && cp -a voxcpm_triton model_repository /tmp/main_tree/
$P -c "import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2], filter='tar')" \
  build/out/session/trees/base.tar.xz /tmp/base_tree
use_tree() {  # use_tree DIR: DIR's voxcpm_triton/ and model_repository/ in place, compiled files dropped
  rm -rf voxcpm_triton model_repository && cp -a "$1/voxcpm_triton" "$1/model_repository" .
  find voxcpm_triton model_repository -name __pycache__ -prune -exec rm -rf {} +
}
turn=0
for arm in main base main base; do
  turn=$((turn + 1))
  [ "$(left $LIMIT)" -gt 150 ] || { echo "no time left for turn $turn ($arm)"; break; }
  use_tree $([ $arm = main ] && echo /tmp/main_tree || echo /tmp/base_tree)
  LEVELS=${ARM_LEVELS:-64,256} PA_LEVELS=" " CAMPAIGN_BUDGET_S=$(( $(left $LIMIT) - 5 )) OUT=$OUT/t${turn}_$arm \
    bash perf/gpu_campaign.sh triton | tail -1
  at t${turn}_$arm $?
  grep "^| 64 \|^| 256 \|^| c=64 \|^| c=256 " $OUT/t${turn}_$arm/summary.md 2>/dev/null | grep -v "text_encoder\|voxcpm "
done
use_tree /tmp/main_tree
pack_outputs profile_step.md summary.md
