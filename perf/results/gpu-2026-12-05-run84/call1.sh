# Run 84, call 1: cuBLASLt GEMMs as programmatic dependents of the kernel before them in the
# captured step (early_start.py, patched in by sitecustomize.py with VOXCPM_PROBE_EARLY=1).
# Part 1 (probe.py): does a captured cuBLASLt/cuBLAS kernel wait for its predecessor when its edge
# is programmatic (controls: a torch kernel must fail, voxcpm row_scale must pass), and what does
# such an edge save in a chain of row_scale -> GEMM. Part 2: the step A/B at 16, 64 and 256 streams.
# First, on the CPU machine: VOXCPM_CUDA_ARCHS=90 bash build/build_kernels.sh /tmp/lib_main,
# xz -c /tmp/lib_main/libvoxcpm_kernels.so > build/out/session/lib.so.xz, git rev-parse HEAD >
# build/out/session/commit; nvcc -arch=sm_90 -cubin -O3 -o late_copy.cubin late_copy.cu here.
# carry: ["build/out/session/lib.so.xz", "build/out/session/commit"]
set -u
source perf/device_call_env.sh
HERE=$PWD/perf/results/gpu-2026-12-05-run84
R=$OUT/r84; mkdir -p $R
export VOXCPM_LT_CACHE=/tmp/ab_lt.json
PYTHONPATH=$HERE:$PYTHONPATH timeout 120 $P $HERE/probe.py $R > $R/probe.log 2>&1; at probe $?
cat $R/probe.log | grep -v Warning | tail -40
l=$(left 560); [ $l -gt 90 ] && PYTHONPATH=$HERE:$PYTHONPATH timeout $l $P perf/ab_step.py --out $R/ab \
  --variant main --variant early=VOXCPM_PROBE_EARLY=1,VOXCPM_PROBE_LOG=$R/early.jsonl \
  --batches 16,64,256 --repeats 3 > $R/ab.log 2>&1; at ab $?
tail -12 $R/ab/ab_step.md 2>/dev/null || tail -20 $R/ab.log
sort $R/early.jsonl | uniq -c | head -30
