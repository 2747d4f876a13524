# Run 69, device call A: on the 64-stream step, (1) run 64's 30 s search finalists as lt_cache seeds
# against run 68's 3 s walks, main's code; (2) with those seeds, the gate_up kernel with 64 x 240
# tiles among its schedules (this tree: interleave 8, schedule 2). The kernel's GPU tests first,
# the gate_up sweep, then an interleaved A/B of the three, then one profile of the fastest.
# carry: ["build/out/session"]: lib.so.xz (main's library), lib240.so.xz (this tree's), both sm_90;
# base_tree.tar.xz (main, git archive of 626b3e8); base.json (run 68 call 1's deep.json);
# seeded.json (seed_cache.py's output from it).
set -u
P=/opt/torch/.venv/bin/python3
S=build/out/session
mkdir -p build/out/lib /tmp/c /tmp/base/build/out/lib
unxz() { $P -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" "$1" "$2"; }
unxz $S/lib240.so.xz build/out/lib/libvoxcpm_kernels.so
unxz $S/lib.so.xz /tmp/base/build/out/lib/libvoxcpm_kernels.so
tar xJf $S/base_tree.tar.xz -C /tmp/base
cp $S/base.json $S/seeded.json /tmp/c/ && cp $S/seeded.json /tmp/c/seeded_main.json
export PYTHONPATH=$PWD VOXCPM_KERNELS_LIB=$PWD/build/out/lib/libvoxcpm_kernels.so PYTHONUNBUFFERED=1
T0=$(date +%s)
timeout 90 $P -m pytest -q -p no:cacheprovider -m gpu tests/gpu/test_gate_up_sm90_gpu.py \
  tests/gpu/test_folded_norms_gpu.py > $OUT/gate_up_tests.log 2>&1
echo "tests rc=$? at $(( $(date +%s) - T0 )) s"; tail -2 $OUT/gate_up_tests.log
timeout 60 $P -m perf.gate_up_sweep --streams 64,128,256 --out $OUT/gate_up_sweep.md > /tmp/c/sweep.log 2>&1
echo "sweep rc=$?"; cat $OUT/gate_up_sweep.md
timeout 330 $P perf/ab_step.py --out /tmp/c/ab \
  --variant main@/tmp/base=VOXCPM_LT_CACHE=/tmp/c/base.json,VOXCPM_KERNELS_LIB=/tmp/base/build/out/lib/libvoxcpm_kernels.so,PYTHONPATH=/tmp/base \
  --variant seeded@/tmp/base=VOXCPM_LT_CACHE=/tmp/c/seeded_main.json,VOXCPM_KERNELS_LIB=/tmp/base/build/out/lib/libvoxcpm_kernels.so,PYTHONPATH=/tmp/base \
  --variant g240=VOXCPM_LT_CACHE=/tmp/c/seeded.json --batches 64 --repeats 3 --no-throwaway \
  --run-timeout-s 55 > $OUT/ab.log 2>&1
echo "ab rc=$? at $(( $(date +%s) - T0 )) s"; tail -8 $OUT/ab.log
left=$(( 560 - ($(date +%s) - T0) ))
[ $left -gt 40 ] && VOXCPM_LT_CACHE=/tmp/c/seeded.json timeout $left $P perf/profile_step.py --out /tmp/c/prof \
  --batches 1,64 --modes graph_ops --profile-batches 64 > /tmp/c/prof.log 2>&1
echo "profile rc=$? at $(( $(date +%s) - T0 )) s"; grep -A4 "^| mode" /tmp/c/prof.log | head -5
cd /tmp/c && tar czf $OUT/callA.tgz ab prof prof.log sweep.log base.json seeded.json seeded_main.json 2>/dev/null; ls $OUT
