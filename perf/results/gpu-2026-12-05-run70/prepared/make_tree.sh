# bash perf/results/gpu-2026-12-05-run70/prepared/make_tree.sh NAME PATCH... : HEAD's files (only run 70's results) with PATCHes applied, in build/out/session/trees/NAME
set -eu
cd /work/main
T=build/out/session/trees/$1; shift
rm -rf $T && mkdir -p $T
git archive HEAD | tar -x -C $T
find $T/perf/results -mindepth 1 -maxdepth 1 ! -name gpu-2026-12-05-run70 -exec rm -rf {} +
for p in "$@"; do patch -s -p1 -d $T < perf/results/gpu-2026-12-05-run70/prepared/$p.patch; done
mkdir -p $T/build/out/session
echo "$(git rev-parse HEAD) + $*" > $T/build/out/session/commit
du -sh $T
