# Two changes to the 64-stream step, A/B against main in one call: this tree holds gate_up_pdl.patch
# (the scaled gate_up launched as a programmatic dependent of the row_scale before it) and the
# locdit_sequence op (the LocDiT's input sequence built by one copy kernel instead of torch.cat's
# strided path). Sized to the ~580 s of device time left after two starts got no machine: one
# variant against main, 64 streams, three repeats. The library's ABI changed with the new op, so
# main's code runs from a tree of HEAD (make_tree.sh main). First, the GPU tests of what they change,
# on this tree's library. Everything is written straight under $OUT so a call cut short returns it.
# First, on the CPU machine: make_tree.sh main; lib.so.xz (main's kernels), lib_both.so.xz (this tree's).
# carry: ["build/out/session/lib.so.xz", "build/out/session/lib_both.so.xz", "build/out/session/commit",
#         "build/out/session/trees/main"]
set -u
source perf/device_call_env.sh
R=$OUT/r80; mkdir -p $R
M=$PWD/build/out/session/trees/main
unpack_lib build/out/session/lib_both.so.xz build/out/lib/libvoxcpm_kernels.so
unpack_lib build/out/session/lib.so.xz $M/build/out/lib/libvoxcpm_kernels.so
timeout 150 $P -m pytest -q -p no:cacheprovider -m gpu tests/gpu/test_folded_norms_gpu.py tests/gpu/test_gate_up_sm90_gpu.py \
  tests/gpu/test_graph_runner.py "tests/gpu/test_ops_parity.py::test_locdit_sequence_is_the_concatenation" \
  "tests/gpu/test_ops_parity.py::test_locdit_sequence_replays_in_a_cuda_graph" > $R/tests.log 2>&1; at tests $?
tail -1 $R/tests.log; grep -m5 "^FAILED\|Error" $R/tests.log
l=$(left 420); [ $l -gt 60 ] && timeout $l $P perf/ab_step.py --out $R/ab \
  --variant main@$M=VOXCPM_KERNELS_LIB=$M/build/out/lib/libvoxcpm_kernels.so,VOXCPM_LT_CACHE=/tmp/ab_lt.json \
  --variant both=VOXCPM_LT_CACHE=/tmp/ab_lt.json --batches 64 --repeats 3 > $R/ab.log 2>&1; at ab $?
tail -8 $R/ab/ab_step.md 2>/dev/null || tail -20 $R/ab.log
