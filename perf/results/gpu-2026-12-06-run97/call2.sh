# Run 97, call 2: call 1's main library had been built without CUTLASS (its Hopper gate_up kernel
# absent: 64-stream A/B and the gate_up tests void). This call: the GPU tier on main's d7f9795 with
# the full library, then short_attention alone at the 64-stream shape (128 sequences x 11 tokens,
# given row scales) and the one-stream one (2 sequences, statistic in the kernel): graph-replayed
# time, and ncu's full set with the per-instruction (SASS) stall samples, to find where its ~9 us go.
# carry: ["build/out/session/lib.so.xz", "build/out/session/commit"]
set -u; LIMIT=${LIMIT:-560}
source perf/device_call_env.sh
export VOXCPM_LT_CACHE=/tmp/r97_lt.json
timeout 300 $P -m pytest -q -p no:cacheprovider -m gpu -rf tests/gpu --ignore=tests/gpu/test_triton_gpu.py \
  > $OUT/tests_main.log 2>&1; at tests_main $?
tail -1 $OUT/tests_main.log; grep -m8 "^FAILED\|Error" $OUT/tests_main.log
for a in "--sequences 128 --scales given" "--sequences 128 --scales none" "--sequences 2 --scales input"; do
  $P perf/short_attention_probe.py $a --time 2>&1 | tail -1
done | tee $OUT/probe.txt
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
l=$(left $LIMIT); [ $l -gt 60 ] && timeout $l $NCU --clock-control none -k regex:short_attention --launch-skip 2 \
  --launch-count 1 --set full --import-source no -o $OUT/sa128 $P perf/short_attention_probe.py --sequences 128 \
  --scales given > $OUT/ncu_run.log 2>&1; at ncu $?
tail -3 $OUT/ncu_run.log
$NCU --import $OUT/sa128.ncu-rep --page details > $OUT/ncu_details.txt 2>&1
$NCU --import $OUT/sa128.ncu-rep --page source --csv --print-source sass > $OUT/ncu_sass.csv 2>&1
wc -c $OUT/ncu_details.txt $OUT/ncu_sass.csv; head -c 300 $OUT/ncu_sass.csv; echo
xz -T4 $OUT/ncu_sass.csv $OUT/sa128.ncu-rep
