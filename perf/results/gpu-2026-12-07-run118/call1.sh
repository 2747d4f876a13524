# Run 118, call 1 (prepared, not run): where a skinny GEMM's time per 8-row tile goes. ncu's full
# set with per-instruction stall samples of the LocDiT's qkv (normed_linear, 1024 -> 2560) at 8, 16
# and 22 rows (one, two and three tiles), and gate_up at 16 and 22, main's library; the third of four
# eager calls each (`--launch-skip 2`: the first two warm the module). CASES (GEMM_ROWS ...) picks
# others or fewer. Any card.
# carry: ["build/out/session/lib.so.xz", "build/out/session/commit"]
set -u; LIMIT=${LIMIT:-240}
source perf/device_call_env.sh
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
for name in ${CASES:-qkv_8 qkv_16 qkv_22 gate_up_16 gate_up_22}; do
  l=$(left $LIMIT); [ $l -gt 30 ] || break
  timeout $l $NCU --clock-control none -k regex:skinny_gemm --launch-skip 2 --launch-count 1 --set full \
    --import-source no -o $OUT/$name $P perf/results/gpu-2026-12-07-run118/tile_probe.py ${name%_*} ${name##*_} \
    > $OUT/$name.log 2>&1; at $name $?
  $NCU --import $OUT/$name.ncu-rep --page details > $OUT/${name}_details.txt 2>&1
  $NCU --import $OUT/$name.ncu-rep --page source --csv --print-source sass > $OUT/${name}_sass.csv 2>&1
  grep -m3 "Duration\|Registers Per\|Achieved Occupancy" $OUT/${name}_details.txt
  $P perf/ncu_sass_summary.py $OUT/${name}_sass.csv --top 8 > $OUT/${name}_summary.txt 2>&1
  head -20 $OUT/${name}_summary.txt
  xz -T4 $OUT/${name}_sass.csv $OUT/$name.ncu-rep
done
