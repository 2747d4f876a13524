"""Back-pressure between ar_decoder and vocoder for a Triton without
ensemble_scheduling.max_inflight_requests (2.51 has none).

The decoder can produce windows faster than the vocoder decodes them (on CPU the windowed decode is
several times dearer than a step); left alone the vocoder's queue, and with it every stream's
latency, grows without bound. Each ar_decoder instance counts the windows it sends and its live
streams, and each vocoder instance the windows it decodes, in one small shared-memory file per
tritonserver; a decoder waits before its next step while more windows are in flight than the
server's live streams are allowed. Both sides of that test are server-wide: with one decoder
instance per GPU, an instance's own windows and its own streams cannot be told apart in what the
vocoders decode, and a lightly loaded instance must not wait on a busy one's windows.

Every counter slot has a single writer (the process that claimed it), so no cross-process lock is
needed; readers sum the slots. Windows that never reach the vocoder (requests sent to ar_decoder
directly, vocoder steps Triton cancelled) make the sum drift upwards; a decoder that has waited
`max_wait_s` while no vocoder was decoding takes the current backlog as its new zero, so drift
costs a pause, never a stall. While a vocoder decodes, the decoder keeps waiting: an overloaded
vocoder (on CPU a batch of a few dozen windows takes seconds) must not read as lost windows, or
its queue would grow without bound again. A vocoder marks when its batch began, so one that hangs
mid-batch stops counting as decoding after `max_batch_s`. Each slot also holds its owner's PID: a
vocoder process killed mid-batch stops counting as decoding at once, and a killed decoder's live
streams stop counting (Triton 2.51 does not restart a killed model process)."""

from __future__ import annotations

import os
import struct
import time
from pathlib import Path

from voxcpm_triton.serving.shared_map import map_shared, process_alive, release, write_claim

SLOTS = 64  # writers per role (instances of one model in one server)
ROLES = ("sent", "decoded")
LIVE = len(ROLES)  # after the roles' counters: each 'sent' slot's live streams
BUSY = LIVE + 1  # then each 'decoded' slot's batch start (time.monotonic_ns), 0 between batches
OWNER = BUSY + 1  # then each slot's owner PID, the roles' slots in the counters' order
ALIVE_RECHECK_S = 1.0  # how long a PID's liveness is taken as known (the step reads it)


def counter_path(server_pid: int) -> Path:
    return Path("/dev/shm") / f"voxcpm-backlog-{server_pid}"


class WindowCounter:
    """This process's slot in the server's counter file, for `role` 'sent' or 'decoded'."""

    def __init__(self, path: Path, role: str) -> None:
        if role not in ROLES:
            raise ValueError(f"role={role!r}; allowed {ROLES}")
        self._claim = None
        for index in range(SLOTS):
            claim = path.with_name(f"{path.name}.{role}{index}")
            try:
                descriptor = os.open(claim, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
            except FileExistsError:
                continue
            try:
                write_claim(descriptor)
            finally:
                os.close(descriptor)
            self._claim = claim
            self._offset = (ROLES.index(role) * SLOTS + index) * 8
            break
        if self._claim is None:
            raise RuntimeError(f"all {SLOTS} '{role}' slots of {path} are taken")
        self._map = map_shared(path, (OWNER + len(ROLES)) * SLOTS * 8)  # after the claim (shared_map's doc)
        struct.pack_into("<q", self._map, OWNER * SLOTS * 8 + self._offset, os.getpid())
        self._alive: dict[int, tuple[float, bool]] = {}  # PID -> (when checked, alive)
        self._path = path
        self._live_offset = (LIVE * SLOTS + index) * 8 if role == "sent" else None
        self._busy_offset = (BUSY * SLOTS + index) * 8 if role == "decoded" else None
        self._value = struct.unpack_from("<q", self._map, self._offset)[0]

    def add(self, count: int) -> None:
        self._value += count
        struct.pack_into("<q", self._map, self._offset, self._value)

    def backlog(self) -> int:
        """Windows sent by all decoders minus windows decoded by all vocoders."""
        values = struct.unpack_from(f"<{len(ROLES) * SLOTS}q", self._map, 0)
        return sum(values[:SLOTS]) - sum(values[SLOTS:])

    def decoded(self) -> int:
        """Windows decoded by all vocoders."""
        return sum(struct.unpack_from(f"<{SLOTS}q", self._map, SLOTS * 8))

    def set_busy(self, busy: bool) -> None:
        """A vocoder's batch begins (True) or ends (False)."""
        struct.pack_into("<q", self._map, self._busy_offset, time.monotonic_ns() if busy else 0)

    def _owners(self, role: str) -> tuple[int, ...]:
        return struct.unpack_from(f"<{SLOTS}q", self._map, (OWNER * SLOTS + ROLES.index(role) * SLOTS) * 8)

    def _owner_alive(self, pid: int) -> bool:
        now = time.monotonic()
        checked = self._alive.get(pid)
        if checked is None or now - checked[0] > ALIVE_RECHECK_S:
            checked = self._alive[pid] = (now, process_alive(pid))
        return checked[1]

    def decoding(self, max_batch_s: float) -> bool:
        """Whether some live vocoder is in a batch that began less than `max_batch_s` ago."""
        now = time.monotonic_ns()
        starts = struct.unpack_from(f"<{SLOTS}q", self._map, BUSY * SLOTS * 8)
        owners = self._owners("decoded")
        return any(0 < now - start < max_batch_s * 1e9 and self._owner_alive(owner)
                   for start, owner in zip(starts, owners) if start)

    def set_live(self, streams: int) -> None:
        """This decoder's live streams (a 'sent' counter's)."""
        struct.pack_into("<q", self._map, self._live_offset, streams)

    def live(self) -> int:
        """Live streams of all running decoders."""
        streams = struct.unpack_from(f"<{SLOTS}q", self._map, LIVE * SLOTS * 8)
        return sum(count for count, owner in zip(streams, self._owners("sent"))
                   if count and self._owner_alive(owner))

    def close(self) -> None:
        if self._live_offset is not None:
            self.set_live(0)
        if self._busy_offset is not None:
            self.set_busy(False)
        self._map.close()
        release(self._path, self._claim)


class BacklogGate:
    """wait(live_streams) publishes this decoder's live streams and returns once at most
    `windows_ahead` windows per live stream of the server are in flight between the decoders and
    the vocoders (or once no vocoder decoded for `max_wait_s`, see the module doc)."""

    def __init__(self, counter: WindowCounter, windows_ahead: int, max_wait_s: float = 0.25,
                 poll_s: float = 0.0005, max_batch_s: float = 60.0) -> None:
        if windows_ahead < 1:
            raise ValueError(f"windows_ahead={windows_ahead}; must be >= 1")
        self.counter = counter
        self.windows_ahead = windows_ahead
        self.max_wait_s = max_wait_s
        self.poll_s = poll_s
        self.max_batch_s = max_batch_s
        self._zero = 0  # backlog taken as lost (never to be decoded)

    def wait(self, live_streams: int) -> None:
        self.counter.set_live(live_streams)
        allowed = self.windows_ahead * max(self.counter.live(), 1)
        raw = self.counter.backlog()
        self._zero = min(self._zero, raw)  # windows taken as lost were decoded after all
        backlog = raw - self._zero
        if backlog <= allowed:
            return
        decoded = self.counter.decoded()
        deadline = time.monotonic() + self.max_wait_s
        while backlog > allowed:
            now, progress = time.monotonic(), self.counter.decoded()
            if progress != decoded or self.counter.decoding(self.max_batch_s):
                decoded, deadline = progress, now + self.max_wait_s
            elif now > deadline:
                self._zero += backlog
                return
            time.sleep(self.poll_s)
            backlog = self.counter.backlog() - self._zero
