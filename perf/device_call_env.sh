# Sourced by a device call's script (perf/results/*/callN.sh), from the repository root on the
# device machine: what every such call needs before its commands, so each script holds only what it
# measures. The call carries build/out/session with lib.so.xz (the kernels library, built on the CPU
# machine: VOXCPM_CUDA_ARCHS=90 VOXCPM_REQUIRE_SM90=1 bash build/build_kernels.sh DIR, then xz; the
# second variable stops a build without the Hopper gate_up kernel, e.g. from a second worktree
# without build/out/cutlass, as run 97's first call had) and commit (git rev-parse
# HEAD of the tree sent). A call that measures a kernel change carries that library too and unpacks
# it where its variant looks (unpack_lib). build/session_libs.sh builds them all, variants included.
# Sets: P (the image's Python with CUDA torch), T0 (the start, in seconds); exports PYTHONPATH,
# VOXCPM_KERNELS_LIB, VOXCPM_GIT_COMMIT, PYTHONUNBUFFERED; defines unpack_lib XZ SO, unpack_variants
# NAME... (a kernel A/B's libraries, paths in LIB[NAME]), at NAME RC (prints what ended and when),
# left LIMIT (seconds left of LIMIT since T0), ab_libraries NAME... (the step A/B of unpacked
# libraries), probe_rows ROUNDS NAME... (run 116's GEMM probe per library), probe_lm NAME... (run
# 124's), skinny_tests NAME (skinny_gemm's GPU tests on a variant) and pack_outputs KEEP...
# (everything into one file). Prints the GPU's name.
P=/opt/torch/.venv/bin/python3
unpack_lib() {
  mkdir -p "$(dirname "$2")"
  $P -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" "$1" "$2"
}
unpack_lib build/out/session/lib.so.xz build/out/lib/libvoxcpm_kernels.so
# Each variant's library (main: build/out/session/lib.so.xz, else lib_NAME.so.xz) unpacked to
# build/out/lib/NAME/, its path in LIB[NAME], for a variant's VOXCPM_KERNELS_LIB.
declare -A LIB
unpack_variants() {
  local v
  for v in "$@"; do
    LIB[$v]=$PWD/build/out/lib/$v/libvoxcpm_kernels.so
    unpack_lib "build/out/session/$([ "$v" = main ] && echo lib || echo "lib_$v").so.xz" "${LIB[$v]}"
  done
}
export PYTHONPATH=$PWD VOXCPM_KERNELS_LIB=$PWD/build/out/lib/libvoxcpm_kernels.so PYTHONUNBUFFERED=1
export VOXCPM_GIT_COMMIT=$(cat build/out/session/commit 2>/dev/null)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
T0=$(date +%s)
at() { echo "$1 rc=$2 at $(( $(date +%s) - T0 )) s"; }
left() { echo $(( $1 - ($(date +%s) - T0) )); }
# perf/ab_step.py over the libraries NAME... (unpack_variants first), interleaved, at AB_BATCHES
# (1,4) streams, AB_REPEATS (3) runs each, within what is left of LIMIT; prints the table and each
# run's profile_step lines into $OUT/per_run.txt, then drops the runs' folders.
ab_libraries() {
  local v variants=() l
  for v in "$@"; do variants+=(--variant "$v=VOXCPM_KERNELS_LIB=${LIB[$v]}"); done
  l=$(left $LIMIT); timeout $l $P perf/ab_step.py --out $OUT/ab "${variants[@]}" --batches ${AB_BATCHES:-1,4} \
    --repeats ${AB_REPEATS:-3} > $OUT/ab.log 2>&1; at ab $?
  cat $OUT/ab/ab_step.md 2>/dev/null || tail -20 $OUT/ab.log
  for f in $OUT/ab/*_*/profile_step.md; do echo $f; cat $f; done > $OUT/per_run.txt 2>/dev/null
  grep -h "graph_ops\|first patch" $OUT/per_run.txt
  for v in "$@"; do rm -rf $OUT/ab/${v}_*; done
  rm -rf $OUT/ab/throwaway
}
# Run 116's probe (the LocDiT's GEMMs at 8-24 rows, in a chain) on each unpacked library NAME...,
# ROUNDS times in turn, into $OUT/probe.txt with the library's name before each line.
probe_rows() {
  local round v
  for round in $(seq "$1"); do
    for v in "${@:2}"; do
      VOXCPM_KERNELS_LIB=${LIB[$v]} timeout 30 $P perf/results/gpu-2026-12-07-run116/rows_probe.py 2>&1 \
        | sed "s/^/$v /" | tee -a $OUT/probe.txt
    done
  done
}
# Run 124's probe (the LMs' GEMMs at 1-4 rows, weights cold) on each unpacked library NAME..., into
# $OUT/lm_probe.txt with the library's name before each line.
probe_lm() {
  local v
  for v in "$@"; do
    VOXCPM_KERNELS_LIB=${LIB[$v]} timeout 60 $P perf/results/gpu-2026-12-07-run124/lm_rows_probe.py 2>&1 \
      | sed "s/^/$v /" | tee -a $OUT/lm_probe.txt; at lm_probe_$v ${PIPESTATUS[0]}
  done
}
# skinny_gemm's GPU tests on the unpacked library NAME, into $OUT/tests_NAME.log (90 s at most).
skinny_tests() {
  VOXCPM_KERNELS_LIB=${LIB[$1]} timeout 90 $P -m pytest -q -p no:cacheprovider -m gpu tests/gpu/test_skinny_gemm_gpu.py \
    > $OUT/tests_$1.log 2>&1; at tests_$1 $?
  tail -2 $OUT/tests_$1.log
}
# A call brings back at most eight files: packs all of $OUT into $OUT/all.tar.xz, copies the A/B's
# table beside it, and keeps only the files named KEEP... (patterns) besides those two.
pack_outputs() {
  local keep=(! -name all.tar.xz ! -name ab_step.md) name
  for name in "$@"; do keep+=(! -name "$name"); done
  (cd $OUT && tar cJf /tmp/all.tar.xz . && mv /tmp/all.tar.xz . && cp ab/ab_step.md . 2>/dev/null
   find . -mindepth 1 "${keep[@]}" -delete 2>/dev/null; ls)
}
