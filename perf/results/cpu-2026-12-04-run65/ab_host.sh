# Run 65: perf/host_step.py on 255dab4 (before) and 00f7688 (after), interleaved three times each.
# Usage from the repository root: bash perf/results/cpu-2026-12-04-run65/ab_host.sh > perf/results/cpu-2026-12-04-run65/ab_host.md
set -euo pipefail
PY=${PY:-build/out/venv/bin/python}
for commit in 255dab4 00f7688; do
  rm -rf /tmp/host_$commit && mkdir /tmp/host_$commit
  git archive $commit | tar x -C /tmp/host_$commit
  cp perf/host_step.py /tmp/host_$commit/perf/  # the same timer for both
done
for round in 1 2 3; do
  for commit in 255dab4 00f7688; do
    echo "### round $round, $commit"
    (cd /tmp/host_$commit && PYTHONPATH=$PWD $OLDPWD/$PY -m perf.host_step --steps 400 2>&1 | grep '^|')
  done
done
