# Run 110, call 1 (prepared in stop 55, not yet run): how much of the fused gate_up's time at 64
# streams is its partial last round. At 1408 rows its pingpong schedule has 22 x 32 = 704 tiles of
# 64 x 256 for 132 multiprocessors of two consumer warpgroups each: 2.67 rounds, so if the tail is not
# hidden ~11% of a third of the step is idle. 58 streams (640 tiles, 2.42 rounds) to 69 (768, 2.91) all
# take 3 rounds; 72 (800) takes 4. If the kernel's time stays flat from 58 to 69 streams, the tail
# is real and a data-parallel + stream-K hybrid of the fused kernel could win up to ~3.5% of the
# 64-stream step; if it grows with the rows, the tail is already hidden and that idea is closed.
# Any Hopper card (H100 and H200 both have 132 multiprocessors): meant for a warm H100 right after
# run 108's call2.sh has stopped on it. ~1 minute.
# carry: ["build/out/session/lib.so.xz", "build/out/session/commit"]
set -u; LIMIT=${LIMIT:-150}
source perf/device_call_env.sh
timeout $(left $LIMIT) $P -m perf.gate_up_sweep --streams 58,60,64,66,69,72 --out $OUT/sweep.md > $OUT/sweep.log 2>&1
at sweep $?
cat $OUT/sweep.md 2>/dev/null || tail -20 $OUT/sweep.log
