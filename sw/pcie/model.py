"""Golden model of ``pcie_rdtable``, the PCIe-complex read lookup table (DESIGN.md §
pcie_rdtable; docs/pcie.md is the reference this model implements).

The model is stepped once per clock cycle with what the table *accepted* in that cycle
(at most one ``req_i`` beat and one ``cpl_i`` beat) and the ``timeout`` input; it then
holds the state after the clock edge: the status outputs (:meth:`RdTableModel.status`) are
cycle exact, and the beats the table must emit are appended to :attr:`req_out` /
:attr:`cpl_out` in order (when they leave depends on the output's ``ready``, which the
model does not see). Bytes and addresses are kept in bytes here, not in granules.

Per cycle, every decision reads the state before the edge:

1. a request takes the lowest free tag (a tag is free when not outstanding; an expired
   entry is not free until it is reported);
2. a completion beat is handled by the packet state machine below, against the entries
   as they were before this cycle;
3. with ``timeout`` = T > 0 the tick counter runs; on a tick every outstanding entry
   (except one allocated in this cycle) ages by one, saturating at :data:`AGE_EXPIRED`;
4. the lowest expired entry (age = AGE_EXPIRED before the edge) is freed and reported.

Completion packets (boundaries from ``last``; ``first`` and the header of later beats are
ignored). On the first beat, with *e* the tag's entry, the first failing check is the cause:

- UNKNOWN_TAG: tag >= entries, not outstanding, or expired;
- OVERRUN: length > e.remaining;
- ADDRESS: addr != e.next;
- MALFORMED: length == 0, length % 16 != 0, or length > max_payload;
- BOUNDARY: length != e.remaining and (addr + length) % rcb != 0.

A bad completion is dropped whole (error event, entry unchanged). A good one leaves with
``kind`` = READ_CPL, ``tile``/``key_index``/``aes`` from the entry, ``xbctx`` = 0, its own
``addr``/``length``/``tag``, ``cc`` = (length == e.remaining), as exactly
ceil(length / beat bytes) beats; the entry advances (and is freed when ``cc``). Surplus
input beats are dropped, a short packet is padded with zero-data beats; both are a FRAMING
error event (tag of the packet), raised at the beat where it shows.

Requests are trusted (they come from the SXP): address a multiple of 16, length a multiple
of 16 in 16 .. max_read, not wrapping past 2³². :meth:`step` raises :class:`ModelError`
for one that is not, and for a request accepted while every tag is outstanding (the RTL
must back-pressure).
"""
import heapq
from collections import deque
from dataclasses import dataclass

from hw.pcie.layout import COUNTER_BITS, GRANULE, TIMEOUT_STEPS, Cause, check_params
from hw.sxp.packet import Kind

from .beats import Beat, header

__all__ = ["RdTableModel", "ModelError", "Entry", "AGE_EXPIRED", "timeout_bounds"]

AGE_EXPIRED = TIMEOUT_STEPS + 1
_COUNT_MAX = (1 << COUNTER_BITS) - 1


class ModelError(AssertionError):
    """The stimulus broke a precondition of the table (not a table error)."""


@dataclass
class Entry:
    tile: int
    key_index: int
    aes: int
    next: int          # next expected byte address
    remaining: int     # bytes still expected
    issued: int        # cycle (step number) of the request, for reports
    age: int = 0


def timeout_bounds(timeout, simultaneous=1):
    """(min, max) cycles from a request's step to the step that reports its timeout, with
    *simultaneous* requests expiring in the same cycle: more than *timeout*, at most
    (STEPS + 1) · ceil(timeout / STEPS) + simultaneous."""
    period = -(-timeout // TIMEOUT_STEPS)
    return timeout + 1, (TIMEOUT_STEPS + 1) * period + simultaneous


class RdTableModel:
    """Cycle-stepped golden model of ``pcie_rdtable`` (see the module docstring)."""

    def __init__(self, entries=256, rcb=64, max_payload=256, max_read=1024, lanes=1):
        self.params = check_params(entries, rcb, max_payload, max_read, lanes)
        self.reset()

    # ---- state -------------------------------------------------------------------
    def reset(self):
        """The table after a reset: every tag free, counters zero, no packet open;
        expected outputs not yet emitted are forgotten (the RTL loses them too)."""
        self.table = {}
        self._free = list(range(self.params.entries))   # a heap: the lowest free tag first
        self._expired = set()
        self.tick_count = 0
        self.err_count = self.err_tag = 0
        self.err_cause = Cause.NONE
        self.timeout_count = self.timeout_tag = 0
        self.pkt_state = "start"   # start / fwd / drop
        self.pkt_left = 0
        self.pkt_hdr = None
        self.req_out = deque()
        self.cpl_out = deque()
        self.errors = []       # (cycle, tag, Cause) of every error event
        self.timeouts = []     # (cycle, tag, issued cycle) of every reported timeout
        self.finished = []     # (cycle, tag) of every request completed by its last completion
        self.cycle = 0

    @property
    def outstanding(self):
        return len(self.table)

    def status(self):
        """The status outputs after the last step."""
        return {"err_count": self.err_count, "err_tag": self.err_tag,
                "err_cause": self.err_cause.value, "timeout_count": self.timeout_count,
                "timeout_tag": self.timeout_tag, "outstanding": self.outstanding}

    def free_tags(self):
        return sorted(self._free)

    def expired_tags(self):
        """Tags that have timed out but are not reported (freed) yet."""
        return sorted(self._expired)

    def _release(self, tag):
        del self.table[tag]
        self._expired.discard(tag)
        heapq.heappush(self._free, tag)

    # ---- one clock cycle -----------------------------------------------------------
    def step(self, req=None, cpl=None, timeout=0):
        """One cycle in which the table accepted *req* (a :class:`Beat` or None) on
        ``req_i`` and *cpl* on ``cpl_i``, with ``timeout`` = *timeout*. Returns the tag the
        request got (or None)."""
        self.cycle += 1
        # decisions on the state before the edge
        report = min(self._expired) if self._expired else None
        alloc = None
        if req is not None:
            self._check_request(req.hdr)
            if not self._free:
                raise ModelError(f"cycle {self.cycle}: request accepted with all "
                                 f"{self.params.entries} tags outstanding")
            alloc = heapq.heappop(self._free)   # decided before this cycle's frees
        if cpl is not None:
            self._cpl_beat(cpl)
        # completion timeout ticks
        if timeout:
            period = -(-timeout // TIMEOUT_STEPS)
            tick = self.tick_count + 1 >= period
            self.tick_count = 0 if tick else self.tick_count + 1
        else:
            tick, self.tick_count = False, 0
        if tick:
            for t, e in self.table.items():
                e.age = min(e.age + 1, AGE_EXPIRED)
                if e.age == AGE_EXPIRED:
                    self._expired.add(t)
        if report is not None:
            e = self.table[report]
            self._release(report)
            self.timeouts.append((self.cycle, report, e.issued))
            self.timeout_count = min(self.timeout_count + 1, _COUNT_MAX)
            self.timeout_tag = report
        if alloc is not None:
            h = req.hdr
            self.table[alloc] = Entry(h["tile"], h["key_index"], h["aes"], h["addr"],
                                      h["length"], self.cycle)
            self.req_out.append(Beat(0, dict(h, tag=alloc), 1, 1))
        return alloc

    def _check_request(self, h):
        length, addr = h["length"], h["addr"]
        if (addr % GRANULE or length % GRANULE or not GRANULE <= length <= self.params.max_read
                or addr + length > 1 << 32):
            raise ModelError(f"read request breaks the table's preconditions: addr {addr:#x} "
                             f"length {length} (16-byte aligned, 16..{self.params.max_read} "
                             f"bytes, not past the end of the 32-bit space)")

    def _error(self, tag, cause):
        self.errors.append((self.cycle, tag, cause))
        self.err_count = min(self.err_count + 1, _COUNT_MAX)
        self.err_tag, self.err_cause = tag, cause

    def check(self, hdr):
        """The :class:`Cause` of a completion header against the table now (NONE if good)."""
        p = self.params
        tag, addr, length = hdr["tag"], hdr["addr"], hdr["length"]
        e = self.table.get(tag)
        if e is None or tag >= p.entries or e.age == AGE_EXPIRED:
            return Cause.UNKNOWN_TAG
        if length > e.remaining:
            return Cause.OVERRUN
        if addr != e.next:
            return Cause.ADDRESS
        if length == 0 or length % GRANULE or length > p.max_payload:
            return Cause.MALFORMED
        if length != e.remaining and (addr + length) % p.rcb:
            return Cause.BOUNDARY
        return Cause.NONE

    def _emit(self, data, first, last):
        self.cpl_out.append(Beat(data, dict(self.pkt_hdr), first, last))

    def _pad(self):
        while self.pkt_left:
            self.pkt_left -= 1
            self._emit(0, 0, int(self.pkt_left == 0))

    def _cpl_beat(self, b):
        p = self.params
        if self.pkt_state == "drop":
            if b.last:
                self.pkt_state = "start"
            return
        if self.pkt_state == "fwd":
            self.pkt_left -= 1
            self._emit(b.data, 0, int(self.pkt_left == 0))
            if self.pkt_left == 0:
                if b.last:
                    self.pkt_state = "start"
                else:
                    self._error(self.pkt_hdr["tag"], Cause.FRAMING)
                    self.pkt_state = "drop"
            elif b.last:
                self._error(self.pkt_hdr["tag"], Cause.FRAMING)
                self._pad()
                self.pkt_state = "start"
            return
        # first beat of a packet
        h = b.hdr
        tag = h["tag"]
        cause = self.check(h)
        if cause is not Cause.NONE:
            self._error(tag, cause)
            self.pkt_state = "start" if b.last else "drop"
            return
        e = self.table[tag]
        cc = int(h["length"] == e.remaining)
        self.pkt_hdr = header(kind=Kind.READ_CPL, tile=e.tile, addr=h["addr"], length=h["length"],
                              aes=e.aes, cc=cc, key_index=e.key_index, tag=tag)
        e.next += h["length"]
        e.remaining -= h["length"]
        if cc:
            self._release(tag)
            self.finished.append((self.cycle, tag))
        self.pkt_left = p.beats(h["length"]) - 1
        self._emit(b.data, 1, int(self.pkt_left == 0))
        if self.pkt_left == 0:
            if not b.last:
                self._error(tag, Cause.FRAMING)
                self.pkt_state = "drop"
            else:
                self.pkt_state = "start"
        elif b.last:
            self._error(tag, Cause.FRAMING)
            self._pad()
            self.pkt_state = "start"
        else:
            self.pkt_state = "fwd"

    # ---- transaction-level helpers (unit tests, directed stimulus) -----------------
    def request(self, timeout=0, **hdr):
        """One cycle with a read request of header fields *hdr*; returns its tag."""
        return self.step(req=Beat(0, header(kind=Kind.READ_REQ, **hdr), 1, 1), timeout=timeout)

    def send(self, packet, timeout=0):
        """Step each beat of *packet* (a list of :class:`Beat`), one per cycle; return the
        completion beats emitted meanwhile (and drain them from :attr:`cpl_out`)."""
        for b in packet:
            self.step(cpl=b, timeout=timeout)
        out = list(self.cpl_out)
        self.cpl_out.clear()
        return out

    def idle(self, cycles, timeout=0):
        for _ in range(cycles):
            self.step(timeout=timeout)
