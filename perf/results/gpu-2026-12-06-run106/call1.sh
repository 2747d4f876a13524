# Run 106, call 1: lt_gemm's choices for the LMs' 64-row GEMMs, timed warm as lt_gemm tunes them and
# cold as the step runs them, against F.linear and every algorithm of cuBLASLt's heuristic
# (lt_cold_probe.py). Main's code and library. On an H200, main's step at 1 and 64 streams after it
# (run 104's part, which no H200 has run yet).
# carry: ["build/out/session/lib.so.xz", "build/out/session/commit"]
set -u; LIMIT=${LIMIT:-400}
source perf/device_call_env.sh
timeout $(left $LIMIT) $P perf/results/gpu-2026-12-06-run106/lt_cold_probe.py $OUT/probe 64 > $OUT/probe.log 2>&1
at probe $?
cat $OUT/probe/lt_cold_probe.md 2>/dev/null || tail -30 $OUT/probe.log
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  l=$(left $LIMIT); timeout $l $P perf/ab_step.py --out $OUT/ab --variant main --variant main2 --batches 1,64 \
    --repeats 3 > $OUT/ab.log 2>&1; at ab $?
  cat $OUT/ab/ab_step.md 2>/dev/null || tail -20 $OUT/ab.log
  for f in $OUT/ab/main*_*/profile_step.md; do echo $f; cat $f; done > $OUT/per_run.txt
  rm -rf $OUT/ab/main_* $OUT/ab/main2_* $OUT/ab/throwaway
fi
