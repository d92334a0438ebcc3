"""Host memory of the untrusted runtime: a sparse 256 MB ring buffer mapped into tile PCI
space, answering read requests with completions and storing write requests.

- Storage is sparse (4 KiB pages created on first write; unwritten bytes read as zero).
- The ring occupies tile PCI addresses [window, window + size). The runtime carves it into
  regions with :meth:`HostMemory.alloc` (a ring allocator: it wraps to the start when the
  end is reached, never over a live allocation) — the regions the SXP configuration maps to
  key contexts (KSELLIMIT).
- Packets are lists of :class:`sw.pcie.beats.Beat` (``hw.sxp.packet`` beats). A read request
  (carrying the PCIe tag the read table gave it) is answered after a random latency by
  completions split at the read-completion boundary (:func:`sw.pcie.host.random_split`,
  :func:`sw.pcie.host.completion_packets`); completions of different reads interleave at
  random, each read's own completions stay in address order (PCIe ordering).
- Write requests are stored at their address, payload bytes in beat order.
- Lanes: beats carry 16·``lanes`` bytes (lane *k* = bytes 16k..16k+15 of the beat). The
  SXP drops a packet whose address or length is not a multiple of 16·lanes, so the read
  completion boundary must be one too (64 B: one beat at lanes 4); every legal split of an
  aligned read then cuts it on beat boundaries.

The host is the adversary: :attr:`HostMemory.read_hook` may rewrite the bytes a read
returns, and tests mutate memory directly (:meth:`HostMemory.write`) to replay, reorder or
tamper with frames.

Errors: every method raises :class:`HostError` (a ValueError) for an argument it cannot
serve — an address range outside the ring or a negative length, a free of an address that
is not a live allocation, a request packet that is malformed
(:class:`sw.pcie.beats.PacketError`, also a HostError here), of a kind other than a read
or write request, a read the completion split cannot cut (not on beats, over the largest
read), or a write whose beats carry fewer bytes than its ``length`` — and
:class:`HostTypeError` (a HostError and a TypeError) for an address or length that is not
an int or data that are not bytes. :meth:`HostMemory.alloc` raises MemoryError when the
ring has no free region of the size asked.
"""
import operator
import random as _random

from hw.sxp.packet import BEAT_BYTES, MAX_PAYLOAD_BYTES, READ_COMPLETION_BOUNDARY, Kind
from sw.pcie.beats import PacketError, check_packet
from sw.pcie.host import completion_packets, random_split

__all__ = ["HostMemory", "HostError", "HostTypeError", "RING_BYTES", "DEFAULT_WINDOW", "PAGE", "LANES"]

RING_BYTES = 256 << 20          # the IPU ring buffer (ITX: "e.g., 256 MB")
DEFAULT_WINDOW = 0x1000_0000    # where the ring sits in tile PCI space (256 MB aligned)
PAGE = 4096
LANES = (1, 2, 4)               # beat widths the SXP is built with (hw.sxp.packet.beat_layout)


class HostError(ValueError):
    """An argument or request packet host memory cannot serve."""


class HostTypeError(HostError, TypeError):
    """An address or length that is not an int, or data that are not bytes."""


def _int(value, what):
    if isinstance(value, bool):
        raise HostTypeError(f"{what} must be an int, not {value!r}")
    try:
        return operator.index(value)
    except TypeError:
        raise HostTypeError(f"{what} must be an int, not {value!r}") from None


class _HostPacketError(HostError, PacketError):
    """A malformed request packet: both a HostError and a :class:`sw.pcie.beats.PacketError`."""


class HostMemory:
    def __init__(self, window=DEFAULT_WINDOW, size=RING_BYTES, rcb=READ_COMPLETION_BOUNDARY,
                 max_payload=MAX_PAYLOAD_BYTES, latency=(1, 40), split="uniform", lanes=1,
                 rng=None):
        if window % PAGE or size % PAGE or size <= 0 or window + size > 1 << 32:
            raise ValueError(f"ring window {window:#x}+{size:#x}: page aligned, inside the "
                             f"32-bit tile PCI space")
        if isinstance(lanes, bool) or lanes not in LANES:
            raise ValueError(f"lanes must be one of {LANES}, not {lanes!r}")
        if rcb % (BEAT_BYTES * lanes):
            raise ValueError(f"read completion boundary {rcb} is not a multiple of the "
                             f"{BEAT_BYTES * lanes}-byte beat at lanes {lanes}")
        if split not in ("uniform", "finest", "coarsest"):
            raise ValueError(f"split must be 'uniform', 'finest' or 'coarsest', not {split!r}")
        lo, hi = latency
        if not 0 <= lo <= hi:
            raise ValueError(f"latency range {latency} must satisfy 0 <= lo <= hi")
        self.window, self.size = window, size
        self.rcb, self.max_payload, self.lanes = rcb, max_payload, lanes
        self.beat_bytes = BEAT_BYTES * lanes
        self.latency, self.split = (lo, hi), split
        self.rng = rng if rng is not None else _random.Random()
        self.pages = {}
        self.read_hook = None        # (addr, length, data) -> data: the host lying
        self.reads = []              # (addr, length, tag) of every read request
        self.writes = []             # (addr, bytes, hdr) of every write request
        self._cursor = 0             # ring allocator: next free offset
        self._live = {}              # offset -> length of live allocations
        self._pending = []           # [ready_cycle, tag, [packets]] per outstanding read

    # ---- storage -------------------------------------------------------------------
    def _offset(self, addr, length):
        addr, length = _int(addr, "address"), _int(length, "length")
        if length < 0:
            raise HostError(f"length {length} is negative")
        off = addr - self.window
        if off < 0 or off + length > self.size:
            raise HostError(f"[{addr:#x}, {addr + length:#x}) is outside the ring window "
                             f"[{self.window:#x}, {self.window + self.size:#x})")
        return off

    def write(self, addr, data):
        """Store *data* (bytes) at tile PCI address *addr* (HostError outside the ring)."""
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise HostTypeError(f"data must be bytes, not {type(data).__name__}")
        off = self._offset(addr, len(data))
        at = 0
        while at < len(data):
            page, inner = divmod(off + at, PAGE)
            n = min(PAGE - inner, len(data) - at)
            buf = self.pages.setdefault(page, bytearray(PAGE))
            buf[inner:inner + n] = data[at:at + n]
            at += n

    def read(self, addr, length):
        """*length* bytes at tile PCI address *addr* (unwritten bytes are zero). HostError
        for a negative length or a range outside the ring, HostTypeError for a non-int."""
        off = self._offset(addr, length)
        out = bytearray()
        while len(out) < length:
            page, inner = divmod(off + len(out), PAGE)
            n = min(PAGE - inner, length - len(out))
            buf = self.pages.get(page)
            out += buf[inner:inner + n] if buf is not None else bytes(n)
        return bytes(out)

    def contains(self, needle):
        """True if *needle* occurs in any written page (leak checks; pages are scanned with
        an overlap so a match across a page boundary is found)."""
        if not needle:
            return True
        keys = sorted(self.pages)
        for i, k in enumerate(keys):
            tail = self.pages[keys[i + 1]][:len(needle) - 1] if i + 1 < len(keys) and \
                keys[i + 1] == k + 1 else b""
            if needle in bytes(self.pages[k]) + bytes(tail):
                return True
        return False

    # ---- ring allocator --------------------------------------------------------------
    def alloc(self, length, align=PAGE):
        """Tile PCI address of a fresh region of *length* bytes (aligned to *align*).
        HostError for a length outside 1..ring size or an align that is not positive,
        MemoryError when no free region fits."""
        length, align = _int(length, "length"), _int(align, "align")
        if length <= 0 or length > self.size:
            raise HostError(f"cannot allocate {length} bytes from a {self.size}-byte ring")
        if align <= 0:
            raise HostError(f"alignment {align} is not positive")
        for start in (self._cursor, 0):          # from the cursor, else wrap to the start
            off = -(-start // align) * align
            if off + length <= self.size and not self._overlaps(off, length):
                self._live[off] = length
                self._cursor = off + length
                return self.window + off
        raise MemoryError(f"ring buffer has no free {length}-byte region")

    def _overlaps(self, off, length):
        return any(off < o + n and o < off + length for o, n in self._live.items())

    def free(self, addr):
        """Release the allocation at *addr* (HostError if none starts there)."""
        addr = _int(addr, "address")
        if addr - self.window not in self._live:
            raise HostError(f"{addr:#x} is not the start of a live allocation")
        del self._live[addr - self.window]

    # ---- packets ---------------------------------------------------------------------
    def request(self, packet, now=0):
        """Accept a request packet (list of beats) from the PCIe side at cycle *now*.
        HostError (nothing recorded, nothing stored) for a packet that is malformed, not a
        read or write request, or asks for bytes outside the ring (see the module
        docstring)."""
        try:
            check_packet(packet, self.lanes)
        except PacketError as e:
            raise _HostPacketError(str(e)) from None
        h = packet[0].hdr
        kind = h["kind"].value if isinstance(h["kind"], Kind) else h["kind"]
        if kind == Kind.READ_REQ.value:
            addr, length, tag = h["addr"], h["length"], h["tag"]
            self._offset(addr, length)
            try:
                split = random_split(addr, length, self.rcb, self.max_payload, self.rng, self.split)
            except ValueError as e:
                raise HostError(f"read request {addr:#x}+{length}: {e}") from None
            self.reads.append((addr, length, tag))
            data = self.read(addr, length)
            if self.read_hook is not None:
                data = bytes(self.read_hook(addr, length, data))
            packets = completion_packets(tag, addr, data, split, self.lanes)
            self._pending.append([now + self.rng.randint(*self.latency), tag, packets])
        elif kind == Kind.WRITE_REQ.value:
            payload = b"".join(b.data.to_bytes(self.beat_bytes, "little") for b in packet)
            if len(payload) < h["length"]:
                raise HostError(f"write request of {h['length']} bytes carries {len(payload)}")
            payload = payload[:h["length"]]
            self._offset(h["addr"], len(payload))
            self.writes.append((h["addr"], payload, dict(h)))
            self.write(h["addr"], payload)
        else:
            name = Kind(kind).name if kind in {k.value for k in Kind} else "no kind"
            raise HostError(f"host got a packet of kind {kind} ({name}) on its request port")

    def completion(self, now=0):
        """The next completion packet to send at cycle *now* (a random read among those
        whose latency has passed; its completions in order), or None."""
        ready = [p for p in self._pending if p[0] <= now]
        if not ready:
            return None
        entry = self.rng.choice(ready)
        packet = entry[2].pop(0)
        if not entry[2]:
            self._pending.remove(entry)
        return packet

    @property
    def outstanding(self):
        return len(self._pending)

    def next_ready(self):
        """Cycle at which the earliest pending completion may go (None if none pend)."""
        return min((p[0] for p in self._pending), default=None)
