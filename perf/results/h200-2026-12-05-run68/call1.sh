# Run 68, device call 1: the GPU tier on this tree (first GPU run since run 64: lt_cache, the LoRA
# merge, PatchWindows, the walk's tile/cluster fix); what a 0.5 s walk finds now; a decoder's start-up
# with no walk, the 0.5 s walk, and a 3 s walk that fills an lt_cache file (deep.json, for call 2).
# carry: ["build/out/session"] (lib.so.xz: this tree's library, sm_90 only; base_tree.tar.xz: main
# before this session, for call 2).
set -u
P=/opt/torch/.venv/bin/python3
mkdir -p build/out/lib
$P -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" build/out/session/lib.so.xz build/out/lib/libvoxcpm_kernels.so
export PYTHONPATH=$PWD VOXCPM_KERNELS_LIB=$PWD/build/out/lib/libvoxcpm_kernels.so PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv > $OUT/gpu.txt 2>&1
T0=$(date +%s)
timeout 250 $P -m pytest -q -p no:cacheprovider -m gpu tests/gpu --ignore=tests/gpu/test_vocoder_gpu.py \
  --ignore=tests/gpu/test_vocoder_fast_layers_gpu.py --ignore=tests/gpu/test_snake_gpu.py \
  --ignore=tests/gpu/test_snake_depthwise_conv_gpu.py --ignore=tests/gpu/test_triton_gpu.py > $OUT/gpu_tier.log 2>&1
echo "gpu tier rc=$? in $(( $(date +%s) - T0 )) s"; tail -3 $OUT/gpu_tier.log
timeout 60 $P -m perf.lt_config_search --streams 64 --budget-s 0.5 --only "dit o_proj,dit down,dit qkv" \
  --out $OUT/walk_0.5s.md > $OUT/walk.log 2>&1; echo "walk rc=$?"; tail -6 $OUT/walk_0.5s.md
mkdir -p /tmp/st
for v in "nowalk VOXCPM_LT_SEARCH_S=0" "walk05 VOXCPM_LT_SEARCH_S=0.5" "deep VOXCPM_LT_SEARCH_S=3 VOXCPM_LT_SEARCH_TOTAL_S=200 VOXCPM_LT_CACHE=$OUT/deep.json" "cached VOXCPM_LT_SEARCH_S=3 VOXCPM_LT_CACHE=$OUT/deep.json"; do
  set -- $v; name=$1; shift
  left=$(( 560 - ($(date +%s) - T0) )); [ $left -lt 30 ] && { echo "$name skipped"; continue; }
  s=$(date +%s.%N)
  env "$@" timeout $left $P perf/profile_step.py --out /tmp/st/$name --batches 64 --modes graph_ops --profile-batches 64 > /tmp/st/$name.log 2>&1
  echo "$name rc=$? wall $(python3 -c "import time;print(round(time.time()-$s,1))") s"; grep -A3 "^| mode" /tmp/st/$name.log | tail -1
done
cp /tmp/st/*.log $OUT/ 2>/dev/null; cd /tmp && tar czf $OUT/startup.tgz st
