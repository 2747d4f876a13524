# Run 132 (any card, ~2 minutes): struct (static_struct.patch), skinny_gemm's static shared memory
# gathered in one struct that launch_tiles sizes with sizeof, where main adds it up by hand
# (static_shared_bytes). The same bytes a block (9232-33808, ptxas), the same stretch after the
# wait as main's (perf/skinny_sass_stretch.py), but ptxas schedules it differently (~1% fewer
# instructions), and runs 119-120 found such changes can move a call's time. skinny_gemm's GPU tests
# on struct, then run 116's and run 124's probes on main and struct: merged only if no call is
# slower.
# Libraries: bash build/session_libs.sh struct=perf/results/gpu-2026-12-07-run132/static_struct.patch
# carry: ["build/out/session/lib.so.xz", "build/out/session/lib_struct.so.xz", "build/out/session/commit"]
set -u
source perf/device_call_env.sh
unpack_variants main struct
skinny_tests struct
probe_rows 2 main struct
probe_lm main struct
