# Run 64, device call 1: cuBLASLt configurations beyond the heuristic's list (perf/lt_config_search.py).
P=/opt/torch/.venv/bin/python3
export PYTHONPATH=$PWD
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > $OUT/gpu.txt
search() {  # streams, budget, names...
  local streams=$1 budget=$2; shift 2
  for name in "$@"; do
    rm -f /tmp/s.md
    timeout $((budget * 3 + 60)) $P -m perf.lt_config_search --streams $streams --budget-s $budget --only "$name" \
      --out /tmp/s.md --json "/tmp/s_${streams}_${name// /_}.json" 2>&1 | grep -v Warn | tee -a $OUT/search.log | tail -2
    [ -f /tmp/s.md ] && tail -1 /tmp/s.md >> $OUT/search.md
  done
}
search 64 30 "dit o_proj"
[ -s $OUT/search.md ] || exit 1  # the script itself failed: keep the device time
search 64 30 "dit down" "dit qkv" "dit gate_up"
search 64 20 "lm qkv" "lm o_proj" "lm gate_up" "lm down"
search 256 15 "dit o_proj" "dit down" "dit qkv"
cd /tmp && tar czf $OUT/search_json.tgz s_*.json
