# Not run: call2.sh measured this patch together with the locdit_sequence op (run 80 of perf/RESULTS.md).
# The scaled gate_up kernel as a programmatic dependent of the row_scale just before it
# (gate_up_pdl.patch: its mainloop overlaps row_scale's end, only its epilogue waits for the scales;
# row_scale triggers its dependents after its own wait). The patch changes only the kernels library,
# so the A/B swaps VOXCPM_KERNELS_LIB: main's library against the patched one, interleaved, the
# same lt_cache for both. Before it, the GPU tests of what the patch touches, on the patched library
# (the folded LocDiT stack at 1408 rows replayed in a graph against a fresh run; the graph runner's
# buckets against each other and against eager).
# First, on the CPU machine: main's library as lib.so.xz; the patched one as lib_pdl.so.xz
# (VOXCPM_CUDA_ARCHS=90 bash build/build_kernels.sh DIR with the patch applied, then xz).
# carry: ["build/out/session/lib.so.xz", "build/out/session/lib_pdl.so.xz", "build/out/session/commit"]
set -u
source perf/device_call_env.sh
mkdir -p /tmp/r80
PDL_LIB=/tmp/pdl/libvoxcpm_kernels.so
unpack_lib build/out/session/lib_pdl.so.xz $PDL_LIB
VOXCPM_KERNELS_LIB=$PDL_LIB timeout 150 $P -m pytest -q -p no:cacheprovider -m gpu tests/gpu/test_folded_norms_gpu.py \
  tests/gpu/test_gate_up_sm90_gpu.py tests/gpu/test_graph_runner.py > /tmp/r80/tests.log 2>&1; at tests $?
tail -1 /tmp/r80/tests.log
l=$(left 560); [ $l -gt 60 ] && timeout $l $P perf/ab_step.py --out /tmp/r80/ab \
  --variant main=VOXCPM_LT_CACHE=/tmp/ab_lt.json --variant pdl=VOXCPM_KERNELS_LIB=$PDL_LIB,VOXCPM_LT_CACHE=/tmp/ab_lt.json \
  --batches 32,64 --repeats 3 > /tmp/r80/ab.log 2>&1; at ab $?
tail -6 /tmp/r80/ab/ab_step.md 2>/dev/null || tail -20 /tmp/r80/ab.log
cd /tmp && tar czf $OUT/r80.tgz r80
