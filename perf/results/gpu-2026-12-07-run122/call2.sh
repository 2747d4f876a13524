# Run 122, call 2 (prepared, not run): the next session's one call. First run 122's probe (~10 s);
# then on an H200 run 110's call2.sh (issue 5's H200 figures, none since run 94), otherwise run
# 121's A/B (gram and epi against main, ~7 minutes). Each writes its own folder; the H200 one is
# packed into one file, since a call brings back at most eight.
# Libraries: bash build/session_libs.sh gram=perf/results/gpu-2026-12-07-run121/skinny_gram.patch \
#   epi=perf/results/gpu-2026-12-07-run121/skinny_epilogue.patch prev=@caf4925; the probe as in
#   call1.sh.
# carry: ["build/out/session/lib.so.xz", "build/out/session/lib_prev.so.xz", "build/out/session/lib_gram.so.xz",
#         "build/out/session/lib_epi.so.xz", "build/out/session/cluster_probe.xz", "build/out/session/commit"]
set -u; ROOT_OUT=$OUT
mkdir -p $ROOT_OUT/r122 && OUT=$ROOT_OUT/r122 bash perf/results/gpu-2026-12-07-run122/call1.sh
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  mkdir -p $ROOT_OUT/h200 && OUT=$ROOT_OUT/h200 LIMIT=${LIMIT:-330} bash perf/results/gpu-2026-12-07-run110/call2.sh
  cd $ROOT_OUT && tar cJf h200.tar.xz h200 && rm -rf h200
else
  mkdir -p $ROOT_OUT/r121 && OUT=$ROOT_OUT/r121 LIMIT=${LIMIT:-420} bash perf/results/gpu-2026-12-07-run121/call1.sh
fi
