# Run 110, call 1 (prepared in stop 55, not yet run): how much of the fused gate_up's time at 64
# streams is its partial last round. At 1408 rows its pingpong schedule has 22 x 32 = 704 tiles of
# 64 x 256 for 132 multiprocessors, whose two consumer warpgroups take turns at the tensor cores:
# 5.33 tiles a multiprocessor on average and 6 on the busiest, so ~11% of a third of the step would
# be idle. At most per multiprocessor: 58 streams (640 tiles) 5; 60 to 69 (672-768) 6; 72 (800) 7.
# If the kernel's time stays flat from 60 to 69 streams and steps at 58 and 72, the tail is real and
# a data-parallel + stream-K hybrid of the fused kernel could win up to ~3.5% of the 64-stream step;
# if it grows with the rows, the tail is already hidden and that idea is closed.
# Any Hopper card (H100 and H200 both have 132 multiprocessors): meant for a warm H100 right after
# run 108's call2.sh has stopped on it. ~1 minute.
# carry: ["build/out/session/lib.so.xz", "build/out/session/commit"]
set -u; LIMIT=${LIMIT:-150}
source perf/device_call_env.sh
timeout $(left $LIMIT) $P -m perf.gate_up_sweep --streams 58,60,64,66,69,72 --out $OUT/sweep.md > $OUT/sweep.log 2>&1
at sweep $?
cat $OUT/sweep.md 2>/dev/null || tail -20 $OUT/sweep.log
