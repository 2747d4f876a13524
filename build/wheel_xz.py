"""Wheels carried as xz tarballs of their files, zipped back into wheels where they are installed.

The device run carries at most 64 MiB, tree included. A wheel is a deflate zip; numpy's 18 MB wheel
is 9 MB as an xz tarball of the same files, grpcio's 7.4 MB is 5.4. build/device_bundle.sh packs
the large wheels this way, and perf/gpu_campaign.sh unpacks them before pip installs the folder.

    python build/wheel_xz.py pack WHEEL             # writes WHEEL.tar.xz beside it, removes WHEEL
    python build/wheel_xz.py unpack WHEEL.tar.xz DIR  # writes DIR/WHEEL
"""

from __future__ import annotations

import io
import lzma
import sys
import tarfile
import zipfile
from pathlib import Path

SUFFIX = ".tar.xz"


def pack(wheel: Path) -> Path:
    """The wheel's files, in its order and with their modes, as WHEEL.tar.xz; the wheel is removed."""
    packed = wheel.with_name(wheel.name + SUFFIX)
    with zipfile.ZipFile(wheel) as zipped, tarfile.open(packed, "w:xz", preset=9 | lzma.PRESET_EXTREME) as tar:
        for info in zipped.infolist():
            if info.is_dir():
                continue
            data = zipped.read(info)
            member = tarfile.TarInfo(info.filename)
            member.size = len(data)
            member.mode = (info.external_attr >> 16) & 0o777 or 0o644
            tar.addfile(member, io.BytesIO(data))
    wheel.unlink()
    return packed


def unpack(packed: Path, folder: Path) -> Path:
    """The wheel back from pack's tarball, into `folder` (stored, not deflated: pip reads either)."""
    if not packed.name.endswith(SUFFIX):
        raise ValueError(f"{packed} does not end in {SUFFIX}")
    wheel = folder / packed.name.removesuffix(SUFFIX)
    with tarfile.open(packed) as tar, zipfile.ZipFile(wheel, "w", zipfile.ZIP_STORED) as zipped:
        for member in tar.getmembers():
            if not member.isfile():
                continue
            info = zipfile.ZipInfo(member.name, date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = (0o100000 | member.mode) << 16
            zipped.writestr(info, tar.extractfile(member).read())
    return wheel


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "pack":
        print(pack(Path(argv[1])))
        return 0
    if len(argv) == 3 and argv[0] == "unpack":
        print(unpack(Path(argv[1]), Path(argv[2])))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
