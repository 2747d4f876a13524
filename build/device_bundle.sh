#!/usr/bin/env bash
# Builds build/out/device/: everything the offline H200 machine needs for perf/gpu_campaign.sh that its
# image lacks (see ../shared/notes/gpu-machine.md and /work/.library/device/KINDS.md):
#   wheels/              Python 3.12 manylinux x86_64 wheels, installed --no-deps there (the two largest
#                        as .whl.tar.xz: build/wheel_xz.py)
#   tritonserver.tar.xz  tritonserver 2.51 + Python backend (stub for 3.12) + perf_analyzer and only the
#                        bundled libraries they load, repacked from nvidia-pytriton 0.7.0 / tritonclient
# The device run carries one folder (build/out/device) and the whole carried tree must stay <= 64 MiB,
# so the script measures the total and fails if it is over.
# Usage: bash build/device_bundle.sh        (needs network to a package index, readelf, xz)
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
DEST=$ROOT/build/out/device
CACHE=$ROOT/build/out/device_download
LIMIT_BYTES=$((64 * 1024 * 1024))
PY=${PYTHON:-python3}

# What the image already holds is left out on purpose (torch 2.11, torchaudio, transformers, tokenizers,
# safetensors, einops, tqdm, huggingface_hub, matplotlib, pytest, scipy, numba, xxhash, ...).
# grpcio is brought although the image has one: tritonclient 2.51's stubs refuse grpcio < 1.67 and the
# image's version is not recorded.
# numpy 1.26.4: the pytriton Python backend breaks silently with numpy 2, and tritonclient wants numpy<2.
# librosa 0.11: 1.x needs numpy 2; the reference and Nano-vLLM-VoxCPM import it at module level.
# wetext and inflect (NORMALIZE) are left out: no benchmark asks for it, their ~7 MB do not fit the
# limit beside the rest, and without them a NORMALIZE request gets an error naming them.
WHEELS=(
  numpy==1.26.4
  protobuf==4.25.9 grpcio==1.85.3
  python-rapidjson==1.25
  voxcpm==2.0.3
  nano-vllm-voxcpm==2.0.5
  pydantic==2.14.4 pydantic-core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5
  typing-extensions==4.16.0
  soundfile==0.14.0 cffi==2.1.1 pycparser==3.12
  librosa==0.11.0 audioread==3.1.0 decorator==5.3.1 pooch==1.9.0 platformdirs==4.14.9 soxr==1.1.0
)
PLATFORMS=(manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_24_x86_64 manylinux_2_17_x86_64
           manylinux2014_x86_64 manylinux1_x86_64)

download() {  # download DIR PLATFORM... -- SPEC...
  local dir=$1; shift
  local plat=()
  while [ "$1" != "--" ]; do plat+=(--platform "$1"); shift; done
  shift
  "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    "${plat[@]}" -d "$dir" "$@"
}

rm -rf "$DEST"
mkdir -p "$DEST/wheels" "$CACHE"

# tritonclient 2.51.0 has a py3-none-any wheel (0.1 MB) and a manylinux one (14 MB, with perf_analyzer): the
# "any" platform alone selects the small one; the big one is only mined for perf_analyzer below.
download "$DEST/wheels" "${PLATFORMS[@]}" any -- "${WHEELS[@]}"
download "$DEST/wheels" any -- tritonclient==2.51.0
# numpy's and grpcio's wheels travel as xz tarballs of their files (~11 MB less); perf/gpu_campaign.sh
# zips them back into wheels before it installs the folder.
for wheel in "$DEST"/wheels/numpy-*.whl "$DEST"/wheels/grpcio-*.whl; do
  "$PY" "$ROOT/build/wheel_xz.py" pack "$wheel" >/dev/null
done
download "$CACHE" manylinux_2_35_x86_64 -- nvidia-pytriton==0.7.0
download "$CACHE" manylinux1_x86_64 -- tritonclient==2.51.0

STAGE=$CACHE/stage
rm -rf "$STAGE" "$CACHE/unpacked"
mkdir -p "$CACHE/unpacked" "$STAGE/tritonserver/bin" "$STAGE/tritonserver/lib" \
  "$STAGE/tritonserver/backends/python"
(cd "$CACHE/unpacked" && unzip -q -o "$CACHE"/nvidia_pytriton-0.7.0-*.whl 'pytriton/tritonserver/*' \
  'nvidia_pytriton.libs/*' && unzip -q -o "$CACHE"/tritonclient-2.51.0-py3-none-manylinux1_x86_64.whl \
  'tritonclient-2.51.0.data/data/bin/perf_analyzer')
SRV=$CACHE/unpacked/pytriton/tritonserver
LIBS=$CACHE/unpacked/nvidia_pytriton.libs
T=$STAGE/tritonserver
install -m 755 "$SRV/bin/tritonserver" "$T/bin/"
install -m 755 "$CACHE/unpacked/tritonclient-2.51.0.data/data/bin/perf_analyzer" "$T/bin/"
install -m 644 "$SRV/backends/python/libtriton_python.so" "$SRV/backends/python/triton_python_backend_utils.py" \
  "$T/backends/python/"
# The stub must sit next to the backend library (notes/triton-facts.md); the machine runs Python 3.12.
install -m 755 "$SRV/python_backend_stubs/3.12/triton_python_backend_stub" "$T/backends/python/"
cp -r "$SRV/caches" "$T/"

# Copy only the bundled libraries reachable through DT_NEEDED from what we ship (the full folder is
# 115 MB, mostly a libpython 3.13 for the 3.13 stub and ICU data the server never loads).
needed_closure() {
  local queue=("$@") seen=" " f lib
  while [ ${#queue[@]} -gt 0 ]; do
    f=${queue[0]}; queue=("${queue[@]:1}")
    for lib in $(readelf -d "$f" | sed -n 's/.*NEEDED.*\[\(.*\)\]/\1/p'); do
      case "$seen" in *" $lib "*) continue ;; esac
      seen="$seen$lib "
      if [ -e "$LIBS/$lib" ]; then echo "$lib"; queue+=("$LIBS/$lib"); fi
    done
  done
}
for lib in $(needed_closure "$T/bin/tritonserver" "$T/backends/python/libtriton_python.so" \
  "$T/backends/python/triton_python_backend_stub" "$T"/caches/local/*.so); do
  install -m 644 "$LIBS/$lib" "$T/lib/"
done
# perf_analyzer asks for the plain sonames; the wheel ships them under hashed names.
for pair in "libb64.so.0d:libb64-*.so.0d" "libcudart.so.12:libcudart-*.so.12.*"; do
  name=${pair%%:*}; pattern=${pair#*:}
  target=$(cd "$T/lib" && ls $pattern | head -1)
  [ -n "$target" ] || { echo "missing $pattern for perf_analyzer" >&2; exit 1; }
  ln -sf "$target" "$T/lib/$name"
done
for lib in libssl.so.3:libssl-*.so.3 libcrypto.so.3:libcrypto-*.so.3; do
  name=${lib%%:*}; target=$(cd "$T/lib" && ls ${lib#*:} | head -1)
  [ -n "$target" ] && ln -sf "$target" "$T/lib/$name"
done
tar -C "$STAGE" -cf - tritonserver | xz -9e -T0 > "$DEST/tritonserver.tar.xz"

(cd "$DEST" && find . -type f -printf '%s %p\n' | sort -k2 > MANIFEST.txt)
carried=$(du -sb "$DEST" | cut -f1)
tree=$(cd "$ROOT" && git ls-files -co --exclude-standard -z | xargs -0 -r du -cb 2>/dev/null | tail -1 | cut -f1)
total=$((carried + tree))
printf 'bundle %s bytes (%.1f MiB), working tree %s bytes, carried total %.1f MiB of 64 MiB\n' \
  "$carried" "$(echo "$carried/1048576" | bc -l)" "$tree" "$(echo "$total/1048576" | bc -l)" | tee -a "$DEST/MANIFEST.txt"
if [ "$total" -gt "$LIMIT_BYTES" ]; then
  echo "over the 64 MiB carry limit" >&2
  exit 1
fi
# A call carries more than this: the kernels library (build/out/session/lib.so.xz, ~2.9 MiB) at
# least. The device counts its limit a little differently: run 134's carry, 63.1 MiB as counted
# here, was refused, and 60.6 MiB went.
if [ $((LIMIT_BYTES - total)) -lt $((4 * 1024 * 1024)) ]; then
  echo "warning: under 4 MiB left beside the bundle for the kernels library and the call's files;" \
    "leave out a wheel the call does not use (e.g. the pydantic ones when Nano-vLLM-VoxCPM does not run)" >&2
fi
