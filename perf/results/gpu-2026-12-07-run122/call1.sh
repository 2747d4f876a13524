# Run 122, call 1 (prepared, not run): cluster_exchange_probe.cu on whatever card comes (~10 s):
# what skinny_gemm's two cluster.sync() calls (each a MEMBAR.ALL.GPU and a cluster barrier) cost
# against relaxed arrives, a push through st.async and an mbarrier, and no exchange.
# Built on the CPU machine: nvcc -O3 -std=c++17 -arch=sm_90 -o probe cluster_exchange_probe.cu,
# then xz -c probe > build/out/session/cluster_probe.xz.
# carry: ["build/out/session/cluster_probe.xz", "build/out/session/commit"]
set -u
source perf/device_call_env.sh
$P -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" \
  build/out/session/cluster_probe.xz /tmp/cluster_probe
chmod +x /tmp/cluster_probe
timeout 60 /tmp/cluster_probe 4000 2>&1 | tee $OUT/cluster_probe.txt; at probe ${PIPESTATUS[0]}
