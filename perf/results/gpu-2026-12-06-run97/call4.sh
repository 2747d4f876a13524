# Run 97, call 4 (on call 3's warm machine): the step with main against the trimmed short_attention
# (lib_trim), which call 3's choice by the kernel alone at 64 streams had passed over for b4.
# carry: ["build/out/session/lib.so.xz", "build/out/session/lib_trim.so.xz", "build/out/session/commit"]
source perf/device_call_env.sh >/dev/null
for v in main trim; do
  unpack_lib build/out/session/$([ $v = main ] && echo lib || echo lib_$v).so.xz $PWD/build/out/lib/$v/libvoxcpm_kernels.so
done
export VOXCPM_LT_CACHE=/tmp/r97_lt.json
timeout 250 $P perf/ab_step.py --out $OUT/ab --variant main=VOXCPM_KERNELS_LIB=$PWD/build/out/lib/main/libvoxcpm_kernels.so \
  --variant trim=VOXCPM_KERNELS_LIB=$PWD/build/out/lib/trim/libvoxcpm_kernels.so --batches 1,64 --repeats 3 > $OUT/ab.log 2>&1
echo rc $?; cat $OUT/ab/ab_step.md; rm -rf $OUT/ab/main_* $OUT/ab/trim_* $OUT/ab/throwaway
