# Run 110, call 3 (run on the warm H100 right after call 2, 2026-12-07 ~03:57 UTC): call 2's sweep
# three times, at 56-75 streams, to see its steps through the runs' noise (call 2 measured each
# shape once). Main's library (90ae0f7's code), as call 2.
# carry: ["build/out/session/lib.so.xz", "build/out/session/lib_prev.so.xz", "build/out/session/commit"]
source perf/device_call_env.sh >/dev/null 2>&1
for i in 1 2 3; do
  $P -m perf.gate_up_sweep --streams 56,58,60,62,64,66,69,72,75 --out $OUT/sweep_r$i.md > $OUT/sweep_r$i.log 2>&1
  echo rep $i rc=$?
done
