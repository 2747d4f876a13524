# Run 86, call 1: folded norm weights whose statistic the next kernel computes (lm_folded_decode.patch,
# C ABI 9). LMs: at 33+ streams each layer's qkv and gate_up GEMMs read the residual stream,
# rope_kv_write and swiglu compute and apply the norms' statistics, the residual adds run in o_proj's
# and down's epilogues, and the two add_rmsnorm kernels of a layer go (72 a step). LocEnc: the same
# with short_attention and swiglu computing them, at 33-2048 rows (24 kernels a step at 64 streams).
# Its GPU tests, then the step interleaved at 64 streams: "main" (every part off), "lms" (LMs only)
# and "both" (the patch's default; its LocDiT part runs only below 1024 rows, which call2.sh times);
# then main against both at 128 and 256 if time is left.
# AB64_REPEATS and TESTS_S shrink it for a short lease.
# First, on the CPU machine, with the patch applied (README.md): VOXCPM_CUDA_ARCHS=90 bash build/build_kernels.sh /tmp/lib_fd,
# xz -c /tmp/lib_fd/libvoxcpm_kernels.so > build/out/session/lib_fd.so.xz, git rev-parse HEAD > build/out/session/commit.
# carry: ["build/out/session/lib_fd.so.xz", "build/out/session/commit"]
set -u
cp build/out/session/lib_fd.so.xz build/out/session/lib.so.xz
source perf/device_call_env.sh
R=$OUT/r86; mkdir -p $R
export VOXCPM_LT_CACHE=/tmp/r86_lt.json
timeout ${TESTS_S:-90} $P -m pytest -q -s -p no:cacheprovider -m gpu tests/gpu/test_folded_decode_gpu.py > $R/tests.log 2>&1
rc=$?; at tests $rc
tail -1 $R/tests.log; grep -m8 "^FAILED\|^ERROR\|max |error|" $R/tests.log
[ $rc = 0 ] || exit 1
l=$(left 400); [ $l -gt 60 ] && timeout $l $P perf/ab_step.py --out $R/ab64 \
  --variant main=VOXCPM_FOLDED_DECODE=0,VOXCPM_FOLDED_ENCODER=0,VOXCPM_FOLDED_DIT=0 \
  --variant lms=VOXCPM_FOLDED_ENCODER=0 --variant both \
  --batches 64 --repeats ${AB64_REPEATS:-3} > $R/ab64.log 2>&1; at ab64 $?
tail -4 $R/ab64/ab_step.md 2>/dev/null || tail -20 $R/ab64.log
# ab_step writes its tables only at the end: start this one only with room for its five runs.
l=$(left 590); [ $l -gt 220 ] && timeout $l $P perf/ab_step.py --out $R/ab \
  --variant main=VOXCPM_FOLDED_DECODE=0,VOXCPM_FOLDED_ENCODER=0,VOXCPM_FOLDED_DIT=0 --variant both \
  --batches 128,256 --repeats 2 > $R/ab.log 2>&1; at ab $?
tail -6 $R/ab/ab_step.md 2>/dev/null || tail -20 $R/ab.log
