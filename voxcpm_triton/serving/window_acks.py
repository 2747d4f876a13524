"""Which streams the vocoder still decodes windows for, shared between the vocoder and ar_decoder
processes of one server, so that a decoder can end a stream nobody listens to any more.

When a client vanishes (killed, network gone) or cancels a `voxcpm` stream with a plain gRPC
cancellation, Triton 2.51 stops forwarding the ensemble's windows to the vocoder, but the decoder
request already streaming is never told: its response sender still reports "not cancelled" and its
sends succeed. Without this the stream held its decoder slot to its length limit (14.6 s on the tiny
checkpoint, perf/RESULTS.md run 58; minutes for a long text on a real one).

The text_encoder opens a cell for the Triton request id of each `voxcpm` request it prepares
(`AckBoard.track`), so a decoder stream that finds a cell as it arrives knows its windows go on to a
vocoder. The stream opens the cell again as it sends its first window, in case it queued past
STALE_AFTER_S and lost it, and frees it when it ends (`forget`). Each vocoder process stamps in that
cell how many windows of the id it decoded and when (`AckBoard.ack`); a window of an id with no cell
(its stream has ended, the last windows were still in flight) is not counted, so an ended stream's
cell does not come back to hold a place in the table. A decoder stream whose last
`ABANDONED_WINDOWS` or more windows sent have gone `ABANDONED_AFTER_S` without one decoded is taken
as abandoned (`StreamWatch`) and its engine slot freed: one whose windows were decoded before, or
one that came through the text_encoder and none of whose windows ever was (its client left while it
queued for a slot). A stream sent to ar_decoder directly, or without a request id, is never ended
this way.

The table lives in one tmpfs file: `CELLS` cells of (id key, windows decoded, monotonic time),
open-addressed by the key. Vocoder processes write it without a lock. A write that races another
process's write can lose a count or a cell: a lost cell reads as "never acknowledged", and a lost
count only makes a live stream look further behind. So a race can keep a stream that was abandoned,
or make a live stream look behind, but the time test also has to hold, and hold twice
`CONFIRM_S` apart, before anything ends.
"""

from __future__ import annotations

import hashlib
import struct
import time
from pathlib import Path
from typing import Callable

from voxcpm_triton.serving.shared_map import claim, map_shared, release

CELLS = 4096
PROBES = 16
STALE_AFTER_S = 30.0  # a cell not stamped for this long may be taken by another id
ABANDONED_AFTER_S = 5.0
ABANDONED_WINDOWS = 4
CONFIRM_S = 1.0
_CELL = struct.Struct("<QQd")  # key, windows decoded, time.monotonic() of the last


def board_path(server_pid: int) -> Path:
    return Path("/dev/shm") / f"voxcpm-acks-{server_pid}"


def _key(request_id: str) -> int:
    return int.from_bytes(hashlib.sha1(request_id.encode()).digest()[:8], "little") | 1  # 0 marks a free cell


class AckBoard:
    """The server's table of decoded windows per request id (created by whichever process opens it
    first; every process maps the same file)."""

    def __init__(self, path: Path, clock: Callable[[], float] = time.monotonic) -> None:
        self._claim = claim(path)  # the last process to close the board removes it
        self._map = map_shared(path, CELLS * _CELL.size)  # zero-filled: every cell free
        self.path = path
        self._clock = clock
        # request id -> (key, the cell it was last found in): a vocoder stamps every window of a
        # batch, so most stamps read one cell instead of hashing and probing (~3.5 us a stamp here).
        self._known: dict[str, tuple[int, int]] = {}

    def _cells(self, key: int):
        for probe in range(PROBES):
            index = (key + probe) % CELLS
            yield index, _CELL.unpack_from(self._map, index * _CELL.size)

    def _find(self, request_id: str) -> tuple[int, int | None]:
        """(key, index of the cell holding it or None)."""
        known = self._known.get(request_id)
        if known is not None and _CELL.unpack_from(self._map, known[1] * _CELL.size)[0] == known[0]:
            return known
        key = known[0] if known is not None else _key(request_id)
        for index, (cell_key, _, _) in self._cells(key):
            if cell_key == key:
                self._remember(request_id, key, index)
                return key, index
        return key, None

    def _remember(self, request_id: str, key: int, index: int) -> None:
        if len(self._known) >= CELLS:
            self._known.clear()
        self._known[request_id] = (key, index)

    def track(self, request_id: str) -> None:
        """Open a cell for `request_id`, no window of it decoded yet (a decoder stream starts); an id
        already tracked keeps its cell and count. With every cell the id may probe taken by ids
        stamped within STALE_AFTER_S, the id goes untracked (read as never acknowledged)."""
        if not request_id:
            return
        now = self._clock()
        key, index = self._find(request_id)
        if index is not None:
            return
        for index, (cell_key, _, when) in self._cells(key):
            if cell_key == 0 or now - when > STALE_AFTER_S:
                # The key last, so that a reader never pairs this id with the previous owner's count.
                offset = index * _CELL.size
                struct.pack_into("<Qd", self._map, offset + 8, 0, now)
                struct.pack_into("<Q", self._map, offset, key)
                self._remember(request_id, key, index)
                return

    def ack(self, request_id: str, windows: int = 1) -> None:
        """Stamp `windows` more decoded windows of `request_id`, if it is tracked."""
        if not request_id:
            return
        key, index = self._find(request_id)
        if index is not None:
            count = _CELL.unpack_from(self._map, index * _CELL.size)[1]
            _CELL.pack_into(self._map, index * _CELL.size, key, count + windows, self._clock())

    def tracked(self, request_id: str) -> bool:
        """Whether `request_id` has a cell."""
        return bool(request_id) and self._find(request_id)[1] is not None

    def decoded(self, request_id: str) -> tuple[int, float] | None:
        """(windows decoded, monotonic time of the last) for `request_id`, None if never stamped."""
        if not request_id:
            return None
        key, index = self._find(request_id)
        if index is None:
            return None
        cell_key, count, when = _CELL.unpack_from(self._map, index * _CELL.size)
        return (count, when) if cell_key == key and count > 0 else None

    def forget(self, request_id: str) -> None:
        """Free the id's cell (its stream has ended), if it still holds it."""
        if not request_id:
            return
        key, index = self._find(request_id)
        self._known.pop(request_id, None)
        if index is not None:
            struct.pack_into("<Q", self._map, index * _CELL.size, 0)

    def close(self) -> None:
        self._map.close()
        release(self.path, self._claim)


class StreamWatch:
    """One decoder stream's view of the board: `sent()` as each window goes out (before the send, so
    that the cell is open before the vocoder can stamp the first one), `abandoned()` when the engine
    asks whether to end it."""

    def __init__(self, board: AckBoard, request_id: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.board = board
        self.request_id = request_id
        self.windows_sent = 0
        self._clock = clock
        self._suspect_since: float | None = None
        # Made on arrival, right after the text_encoder opened the cell: a vocoder will stamp it.
        self.expects_acks = board.tracked(request_id)
        self._first_sent = 0.0

    def sent(self) -> None:
        if self.windows_sent == 0:
            self.board.track(self.request_id)
            self._first_sent = self._clock()
        self.windows_sent += 1

    def ended(self) -> None:
        """The stream is over: free its cell for other ids."""
        self.board.forget(self.request_id)

    def abandoned(self) -> bool:
        if self.windows_sent < ABANDONED_WINDOWS:
            return False
        record = self.board.decoded(self.request_id)
        now = self._clock()
        if record is None:  # a lost cell is not a lost client: only an open cell with no stamp counts
            behind = (self.expects_acks and now - self._first_sent > ABANDONED_AFTER_S
                      and self.board.tracked(self.request_id))
        else:
            behind = self.windows_sent - record[0] >= ABANDONED_WINDOWS and now - record[1] > ABANDONED_AFTER_S
        if not behind:
            self._suspect_since = None
            return False
        if self._suspect_since is None:
            self._suspect_since = now
        return now - self._suspect_since >= CONFIRM_S
