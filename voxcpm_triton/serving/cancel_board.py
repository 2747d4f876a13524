"""Cancellation requests shared by the ar_decoder instances of one server.

Triton runs each model instance in its own process (one per GPU), and a CANCEL_ID request may land
on an instance that does not hold the stream it names. That instance posts the id here: a folder on
tmpfs where a file named after the id asks whichever instance holds the stream to end it. Each
engine loop looks at the folder once per step (a directory listing; no stream holds a lock)."""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

from voxcpm_triton.serving.shared_map import claim, release

STALE_AFTER_S = 30.0  # a posted id no instance claimed (its stream had ended) is removed after this


def board_folder(server_pid: int) -> Path:
    return Path("/dev/shm") / f"voxcpm-cancel-{server_pid}"


def _file_name(request_id: str) -> str:
    return hashlib.sha1(request_id.encode()).hexdigest()


class CancelBoard:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._claim = claim(folder)  # the last instance to close the board removes it
        self.folder.mkdir(parents=True, exist_ok=True)

    def close(self) -> None:
        release(self.folder, self._claim)

    def post(self, request_id: str) -> None:
        path = self.folder / _file_name(request_id)
        temporary = path.with_suffix(f".{os.getpid()}.tmp")
        temporary.write_text(request_id)
        temporary.replace(path)  # atomic: readers never see a half-written id

    def take(self, request_ids: list[str]) -> list[str]:
        """The ids among `request_ids` posted for cancellation; their posts are removed."""
        try:
            posted = {entry.name: entry for entry in os.scandir(self.folder) if not entry.name.endswith(".tmp")}
        except FileNotFoundError:
            return []
        if not posted:
            return []
        taken = []
        for request_id in request_ids:
            entry = posted.pop(_file_name(request_id), None)
            if entry is not None:
                Path(entry.path).unlink(missing_ok=True)
                taken.append(request_id)
        now = time.time()
        for entry in posted.values():
            try:
                if now - entry.stat().st_mtime > STALE_AFTER_S:
                    Path(entry.path).unlink(missing_ok=True)
            except FileNotFoundError:
                pass
        return taken
