"""Golden model of ``pcie_rdtable``, the PCIe-complex read lookup table (DESIGN.md §
pcie_rdtable; docs/pcie.md is the reference this model implements).

The model is stepped once per clock cycle with what the table *took* in that cycle: at
most one ``req_i`` beat (accepted on the port) and one completion beat (taken from the
table's check register into its checks: a ``cpl_i`` beat is accepted into that register
and taken from it in the first later cycle in which ``cpl_i.ready`` is 1; see
:class:`CheckRegister`) and the ``timeout`` input; it then
holds the state after the clock edge: the status outputs (:meth:`RdTableModel.status`) are
cycle exact, and the beats the table must emit are appended to :attr:`req_out` /
:attr:`cpl_out` in order (when they leave depends on the output's ``ready``, which the
model does not see). Bytes and addresses are kept in bytes here, not in granules (a
granule is one beat, 16 · lanes bytes).

Per cycle, every decision reads the state before the edge:

1. a request takes the lowest free tag (a tag is free when not outstanding; an expired
   entry is not free until it is reported);
2. a completion beat is handled by the packet state machine below, against the entries
   as they were before this cycle, except that the tag allocated in the cycle before is
   still unknown (the RTL writes its entry in this cycle);
3. the tick counter runs with the ``timeout`` T of the cycle before (T = 0: stopped and
   cleared) and hits every ceil(T / 4) cycles; a hit ticks the ages one cycle later: on a
   tick every outstanding entry (except one allocated in this cycle) ages by one, saturating at :data:`AGE_EXPIRED`;
4. the lowest expired entry (age = AGE_EXPIRED before the edge) is freed and reported.

Completion packets (boundaries from ``last``; ``first`` and the header of later beats are
ignored). On the first beat, with *e* the tag's entry, the first failing check is the cause:

- UNKNOWN_TAG: tag >= entries, not outstanding, expired, or allocated in the cycle before;
- OVERRUN: length > e.remaining;
- ADDRESS: addr != e.next;
- MALFORMED: length == 0, length % granule != 0, or length > max_payload;
- BOUNDARY: length != e.remaining and (addr + length) % rcb != 0.

A bad completion is dropped whole (error event, entry unchanged). A good one leaves with
``kind`` = READ_CPL, ``tile``/``key_index``/``aes`` from the entry, ``xbctx`` = 0, its own
``addr``/``length``/``tag``, ``cc`` = (length == e.remaining), as exactly
length / beat bytes beats; the entry advances (and is freed when ``cc``). Surplus
input beats are dropped, a short packet is padded with zero-data beats; both are a FRAMING
error event (tag of the packet), raised at the beat where it shows.

Requests are trusted (they come from the SXP): address a multiple of the granule, length
a multiple of the granule in granule .. max_read, not wrapping past 2³². :meth:`step` raises :class:`ModelError`
for one that is not, and for a request accepted while every tag is outstanding (the RTL
must back-pressure).

Malformed input: a ``req`` or ``cpl`` that is not a beat the port can carry — not a
:class:`~sw.pcie.beats.Beat`, data wider than the beat, ``first``/``last`` not bits, a
request header or a completion's first-beat header missing a field or out of range — is
refused by :meth:`RdTableModel.step` with :class:`sw.pcie.beats.PacketError` (a
ValueError) before the model changes state; *timeout* must be an int >= 0 (PacketError).
The headers of later completion beats are not checked: the table ignores them.
"""
import heapq
from collections import deque
from dataclasses import dataclass

from hw.pcie.layout import COUNTER_BITS, TIMEOUT_STEPS, Cause, check_params
from hw.sxp.packet import Kind

from .beats import Beat, PacketError, check_beat, header

__all__ = ["RdTableModel", "ModelError", "Entry", "AGE_EXPIRED", "timeout_bounds",
           "CheckRegister"]

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
        self._tick = False        # the tick counter hit in the cycle before
        self._timeout = 0         # the timeout input of the cycle before
        self._fresh = None        # the tag allocated in the cycle before
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
        request got (or None). PacketError for malformed input (module docstring)."""
        if req is not None:
            check_beat(req, self.params.lanes, what="req_i beat")
        if cpl is not None:
            check_beat(cpl, self.params.lanes, hdr=self.pkt_state == "start", what="cpl_i beat")
        if type(timeout) is not int or timeout < 0:
            raise PacketError(f"timeout {timeout!r} is not an int >= 0")
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
            self._cpl_beat(cpl)            # sees self._fresh of the cycle before
        # completion timeout ticks
        timeout, self._timeout = self._timeout, timeout
        if timeout:
            period = -(-timeout // TIMEOUT_STEPS)
            hit = self.tick_count + 1 >= period
            self.tick_count = 0 if hit else self.tick_count + 1
        else:
            hit, self.tick_count = False, 0
        tick, self._tick = self._tick, hit
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
        self._fresh = None
        if alloc is not None:
            h = req.hdr
            self.table[alloc] = Entry(h["tile"], h["key_index"], h["aes"], h["addr"],
                                      h["length"], self.cycle)
            self.req_out.append(Beat(0, dict(h, tag=alloc), 1, 1))
        self._fresh = alloc
        return alloc

    def _check_request(self, h):
        length, addr, g = h["length"], h["addr"], self.params.granule
        if (addr % g or length % g or not g <= length <= self.params.max_read
                or addr + length > 1 << 32):
            raise ModelError(f"read request breaks the table's preconditions: addr {addr:#x} "
                             f"length {length} ({g}-byte aligned, {g}..{self.params.max_read} "
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
        if e is None or tag >= p.entries or e.age == AGE_EXPIRED or tag == self._fresh:
            return Cause.UNKNOWN_TAG
        if length > e.remaining:
            return Cause.OVERRUN
        if addr != e.next:
            return Cause.ADDRESS
        if length == 0 or length % p.granule or length > p.max_payload:
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
        """Two cycles: a read request of header fields *hdr*, then the cycle its tag leaves
        on ``req_o`` (a completion for it can be checked from the cycle after); returns
        its tag."""
        tag = self.step(req=Beat(0, header(kind=Kind.READ_REQ, **hdr), 1, 1), timeout=timeout)
        self.step(timeout=timeout)
        return tag

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


class CheckRegister:
    """When the table takes each ``cpl_i`` beat into its checks, from its ports alone.

    A beat accepted on ``cpl_i`` waits in the table's one-beat check register; while that
    register is full, ``cpl_i.ready`` is 1 exactly in the cycles the table takes the held
    beat. :meth:`cycle` is called once per clock cycle with the beat ``cpl_i`` accepted in
    that cycle (or None) and ``cpl_i.ready``; it returns the beat the table checks in that
    cycle (the one to step :class:`RdTableModel` with), or None."""

    def __init__(self):
        self.held = None

    def clear(self):
        self.held = None

    def cycle(self, accepted, ready):
        taken = self.held if ready else None
        if taken is not None:
            self.held = None
        if accepted is not None:
            if self.held is not None:
                raise AssertionError("cpl_i accepted a beat while the check register was full")
            self.held = accepted
        return taken
