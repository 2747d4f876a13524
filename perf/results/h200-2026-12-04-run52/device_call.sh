# wip/gate-up-pdl: the fused gate_up launched as a programmatic dependent (library lib_pdl) against main's library.
set -x
P=/opt/torch/.venv/bin/python3
dec() { $P -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" "$1" "$2"; }
dec build/out/session/lib_main.so.xz /tmp/main.so
dec build/out/session/lib_pdl.so.xz /tmp/pdl.so
export PYTHONPATH=$PWD VOXCPM_GIT_COMMIT=$(cat build/out/session/commit)
VOXCPM_KERNELS_LIB=/tmp/pdl.so timeout 120 $P -m pytest -q -m gpu -p no:cacheprovider tests/gpu/test_gate_up_sm90_gpu.py \
    > $OUT/gate_up_tests_pdl.log 2>&1; tail -3 $OUT/gate_up_tests_pdl.log
VOXCPM_KERNELS_LIB=/tmp/main.so timeout 60 $P -m pytest -q -m gpu -p no:cacheprovider tests/gpu/test_gate_up_sm90_gpu.py \
    -k norm_before > $OUT/gate_up_tests_main.log 2>&1; tail -3 $OUT/gate_up_tests_main.log
timeout 250 $P perf/ab_step.py --out /tmp/ab --variant base=VOXCPM_KERNELS_LIB=/tmp/main.so \
    --variant pdl=VOXCPM_KERNELS_LIB=/tmp/pdl.so --batches 64,256 --repeats 2 --no-throwaway --run-timeout-s 60
cat /tmp/ab/ab_step.md
tar czf $OUT/ab_pdl.tgz -C /tmp ab
