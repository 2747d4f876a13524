# Run 107, call 2: call 1 made to fit ~270 s of device time (call 1 never got a machine): the probe
# once per library, the step at 64 streams only, two repeats.
# carry: ["build/out/session/lib.so.xz", "build/out/session/lib_tok.so.xz", "build/out/session/lib_tok2.so.xz", "build/out/session/commit"]
PROBE_REPS=1 AB_BATCHES=64 AB_REPEATS=2 LIMIT=${LIMIT:-270} bash perf/results/gpu-2026-12-06-run107/call1.sh
