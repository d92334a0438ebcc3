"""Tile model (testbench side): the tile bootloader, the data-stream reader and the
checkpoint writer/reader, following ITX § secure bootstrapping / confidential streams /
checkpoints.

A :class:`Tile` runs one *program* at a time: a generator that yields :class:`Read` and
:class:`Write` actions and gets each read's frame back. The tile turns actions into
``hw.sxp.packet`` packets in :attr:`Tile.outbox` (towards the SXP's ``xb_i``) and takes the
completions the SXP sends it with :meth:`Tile.deliver`. Nothing here waits on a clock, so
the same tile runs on the reference link (``sw.itx.testing``), the SXP golden model and
the RTL under cocotb: the harness moves packets and says when a frame is good.

Staging: the completions of a read land in a staging buffer, never in tile memory. When
the last completion of the frame has arrived the frame is *complete*; a frame whose tag
slot came back all zero (the SXP's in-band "refused" signal) halts the tile at once;
otherwise the harness calls :meth:`Tile.commit` once it knows the SXP raised no
authentication exception for it, or :meth:`Tile.security_exception`. Only a committed
frame reaches the program, and the program checks the IV before it copies a byte into
tile memory, so no byte of a frame that fails either check is ever accepted.

Lanes: ``Tile(id, lanes=L)`` sends and takes beats of 16·L bytes (lane *k* = bytes
16k..16k+15 of the beat). Every read and write it issues must start and end on a beat
(the SXP drops anything else as MALFORMED): the runtime's layout guarantees it and the
tile refuses an unaligned action with ValueError.

Malformed packets: :meth:`Tile.deliver` raises :class:`PacketError` (a ValueError; a
TypeError too, :class:`PacketTypeError`, for something that is not a list of beats) for a
packet that is not a non-empty list of :class:`~sw.pcie.beats.Beat` whose first header is
a full, in-range header dict and whose beats' data fit the tile's beat — before it changes
any state. A well-formed completion the tile did not ask for is not an error of the call:
it halts the tile (:attr:`Cause.PROTOCOL`), as the hardware would.
"""
import hashlib
from collections import deque
from dataclasses import dataclass

from hw.sxp.packet import BEAT_BYTES, MAX_PAYLOAD_BYTES, Kind
from sw.pcie.beats import Beat, PacketError, PacketTypeError, check_packet, header

from .frames import (
    IV_BYTES,
    TAG_BYTES,
    StreamType,
    checkpoint_nonce,
    frame_count,
    iv_block,
    payload_bytes,
    stream_nonce,
)

__all__ = ["Tile", "Read", "Write", "SecurityException", "Cause", "TILE_MEMORY",
           "PacketError", "PacketTypeError", "check_packet",
           "CodeSlice", "StreamSlice", "CheckpointSlot", "bootloader", "clear_loader", "read_stream",
           "write_checkpoint", "read_checkpoint", "tile_digest", "application_measurement",
           "check_measurement", "write_packets"]

TILE_MEMORY = 624 * 1024    # GC200: 624 KiB SRAM per tile


class Cause:
    SXP_AUTH = "sxp-authentication"     # the SXP flagged the frame (tag mismatch, bad IV tail)
    IV_MISMATCH = "iv-mismatch"         # the frame authenticates but is not the one expected
    MEASUREMENT = "measurement"         # the binary's hash differs from the manifest's
    PROTOCOL = "protocol"               # a completion the tile did not ask for
    HELD = "held"                       # the CCU holds the tiles (its exception handler)
    PIN = "exception-pin"               # the device's exception pin (the CCU reads the cause)


class SecurityException(Exception):
    def __init__(self, cause, tile=None, detail=""):
        super().__init__(f"security exception ({cause}) on tile {tile}: {detail}")
        self.cause, self.tile, self.detail = cause, tile, detail


@dataclass(frozen=True)
class Read:
    addr: int       # tile PCI address of the frame
    length: int     # frame bytes
    xbctx: int
    aes: int = 1


@dataclass(frozen=True)
class Write:
    addr: int
    frame: bytes    # IV block ‖ plaintext ‖ tag slot (the SXP encrypts and fills the tag)
    xbctx: int


# ---- what the bootloader / reader / writer are told (compile-time constants) -----------
@dataclass(frozen=True)
class StreamSlice:
    """Frames [first, first + count) of a code or data stream, and where they go."""
    type: StreamType
    stream: int          # stream id
    addr: int            # tile PCI address of frame 0 of the stream
    frame_bytes: int
    length: int          # stream length in bytes (the last frame's padding is stripped)
    xbctx: int
    first: int = 0
    count: int | None = None     # None: to the end of the stream

    def frames(self):
        n = frame_count(self.length, self.frame_bytes)
        return range(self.first, n if self.count is None else self.first + self.count)

    def nonce(self, i):
        return stream_nonce(self.type, self.stream, i)


CodeSlice = StreamSlice   # a tile's code stream is read whole by its bootloader


@dataclass(frozen=True)
class CheckpointSlot:
    """Where a tile's part of a checkpoint lives in tile PCI space, and its size."""
    addr: int
    frame_bytes: int
    length: int          # state bytes
    xbctx: int


# ---- the tile ---------------------------------------------------------------------
class Tile:
    def __init__(self, tile_id, ipu=0, memory_bytes=TILE_MEMORY, epoch=0, checkpoint=0,
                 lanes=1):
        if isinstance(lanes, bool) or lanes not in (1, 2, 4):
            raise ValueError(f"lanes must be 1, 2 or 4, not {lanes!r}")
        self.id, self.ipu, self.lanes = tile_id, ipu, lanes
        self.beat_bytes = BEAT_BYTES * lanes
        self.memory = bytearray(memory_bytes)
        self.epoch, self.checkpoint = epoch, checkpoint   # assigned by the CCU with the bootloader
        self.digest = None          # SHA-384 of the loaded binary (bootloader)
        self.loaded = 0             # bytes of binary in memory
        self.outbox = deque()       # packets (lists of Beat) towards xb_i
        self.exception = None
        self.frames_committed = 0
        self._prog = None
        self._read = None           # the outstanding Read
        self._stage = None          # its staging buffer
        self._got = 0
        self.complete = False       # staged frame waiting for commit()

    @property
    def busy(self):
        return self._prog is not None

    def run(self, program):
        """Start *program* (a generator of actions); its first actions go to the outbox."""
        if self._prog is not None:
            raise RuntimeError(f"tile {self.id} is already running a program")
        if self.exception is not None:
            raise RuntimeError(f"tile {self.id} is halted by {self.exception}")
        self._prog = program
        self._step(None)

    def _step(self, value):
        try:
            action = self._prog.send(value)
            while isinstance(action, Write):
                self._check_aligned(action.addr, len(action.frame))
                self.outbox.extend(write_packets(self.id, action, self.lanes))
                action = self._prog.send(None)
        except StopIteration:
            self._prog = None
            return
        except SecurityException as e:
            self._halt(e)
            return
        if not isinstance(action, Read):
            raise TypeError(f"tile program yielded {action!r}")
        self._check_aligned(action.addr, action.length)
        self._read, self._stage, self._got, self.complete = action, bytearray(action.length), 0, False
        self.outbox.append([Beat(0, header(kind=Kind.READ_REQ, tile=self.id, xbctx=action.xbctx,
                                           addr=action.addr, length=action.length,
                                           aes=action.aes), 1, 1)])

    def _check_aligned(self, addr, length):
        # the SXP drops (MALFORMED) a packet whose address or length is not a multiple of
        # the beat: a program asking for one is a layout bug of the runtime, not an attack
        if addr % self.beat_bytes or length % self.beat_bytes or length <= 0:
            raise ValueError(f"tile {self.id}: access {addr:#x}+{length} is not on "
                             f"{self.beat_bytes}-byte beats (lanes {self.lanes})")

    def _halt(self, exc):
        self.exception = exc
        if self._prog is not None:
            self._prog.close()
        self._prog = self._read = self._stage = None
        self.complete = False

    def deliver(self, packet):
        """Stage one completion packet (list of beats) from the SXP. Returns True when the
        read's last completion is in (then call :meth:`commit` or
        :meth:`security_exception`). :class:`PacketError` for a malformed packet (see the
        module docstring), checked before anything else, halted or not."""
        check_packet(packet, self.lanes)
        if self.exception is not None:
            return False          # halted: everything that arrives is dropped
        h = packet[0].hdr
        r = self._read
        if r is None or self.complete or h["kind"] != Kind.READ_CPL.value or h["tile"] != self.id:
            self._halt(SecurityException(Cause.PROTOCOL, self.id, f"unexpected completion {h}"))
            return False
        off = h["addr"] - r.addr
        if off != self._got or off + h["length"] > r.length:
            self._halt(SecurityException(Cause.PROTOCOL, self.id,
                                         f"completion at {h['addr']:#x}+{h['length']} does not "
                                         f"continue the read at {r.addr:#x}+{self._got}"))
            return False
        data = b"".join(b.data.to_bytes(self.beat_bytes, "little")
                        for b in packet)[:h["length"]]
        self._stage[off:off + len(data)] = data
        self._got += len(data)
        self.complete = self._got == r.length
        if self.complete and not h["cc"]:
            self._halt(SecurityException(Cause.PROTOCOL, self.id, "read complete without cc"))
            return False
        if self.complete and r.aes and not any(self._stage[-TAG_BYTES:]):
            # the SXP zeroes the tag slot of a frame whose tag did not verify or whose op
            # its engine refused (docs/sxp.md): discard it without waiting for irq
            self._halt(SecurityException(Cause.SXP_AUTH, self.id,
                                         f"frame at {r.addr:#x}: tag slot zero (the SXP "
                                         f"refused it)"))
            return False
        return self.complete

    def commit(self):
        """The SXP raised no exception for the staged frame: hand it to the program."""
        if not self.complete:
            raise RuntimeError(f"tile {self.id}: commit with no complete frame staged")
        frame = bytes(self._stage)
        self._read = self._stage = None
        self.complete = False
        self.frames_committed += 1
        self._step(frame)

    def security_exception(self, cause=Cause.SXP_AUTH, detail=""):
        """The SXP (or the CCU) raised a security exception: drop what is staged, halt."""
        self._halt(SecurityException(cause, self.id, detail))


def write_packets(tile, w, lanes=1):
    """The write-request packets of frame *w*: ≤ 256-byte packets, ``aes`` on all, ``cc``
    on the last (ITX § confidential streams, writes (iii)), in beats of 16·*lanes* bytes
    (a frame of 128·n bytes cuts into whole beats at every lanes the SXP has)."""
    beat_bytes = BEAT_BYTES * lanes
    packets = []
    for at in range(0, len(w.frame), MAX_PAYLOAD_BYTES):
        chunk = w.frame[at:at + MAX_PAYLOAD_BYTES]
        last = at + MAX_PAYLOAD_BYTES >= len(w.frame)
        hdr = header(kind=Kind.WRITE_REQ, tile=tile, xbctx=w.xbctx, addr=w.addr + at,
                     length=len(chunk), aes=1, cc=int(last))
        packets.append([Beat(int.from_bytes(chunk[k:k + beat_bytes].ljust(beat_bytes, b"\0"),
                                            "little"), dict(hdr), int(k == 0),
                             int(k + beat_bytes >= len(chunk)))
                        for k in range(0, len(chunk), beat_bytes)])
    return packets


# ---- tile programs ----------------------------------------------------------------
def _read_frames(tile, sl, nonce, dest, landed=None):
    """Read the frames of *sl* with expected nonces ``nonce(i)``; copy payloads (padding
    stripped) to tile memory at *dest*, calling ``landed(payload)`` for each (the
    bootloader hashes them). A generator of actions."""
    size = payload_bytes(sl.frame_bytes)
    for i in sl.frames():
        frame = yield Read(sl.addr + i * sl.frame_bytes, sl.frame_bytes, sl.xbctx)  # (i), (ii)
        expected = iv_block(nonce(i))
        if frame[:IV_BYTES] != expected:                                              # (iii)
            raise SecurityException(Cause.IV_MISMATCH, tile.id,
                                    f"frame {i} at {sl.addr + i * sl.frame_bytes:#x}: IV "
                                    f"{frame[:IV_BYTES].hex()} expected {expected.hex()}")
        payload = frame[IV_BYTES:-TAG_BYTES]                                          # (iv)
        start = i * size
        payload = payload[:max(0, min(size, sl.length - start))]                      # (v)
        at = dest + (i - sl.frames().start) * size
        if at + len(payload) > len(tile.memory):
            raise ValueError(f"tile {tile.id}: frame {i} would land past the end of tile memory")
        tile.memory[at:at + len(payload)] = payload
        if landed is not None:
            landed(payload)


def bootloader(tile, code, load_base=0):
    """Secure boot: read the tile's code stream frame by frame into tile memory at
    *load_base*, hashing it; ``tile.digest`` = SHA-384 of the binary."""
    h = hashlib.sha384()
    tile.loaded = 0

    def landed(payload):
        h.update(payload)
        tile.loaded += len(payload)

    yield from _read_frames(tile, code, code.nonce, load_base, landed)
    tile.digest = h.digest()


def clear_loader(tile, addr, length, dest=0, block_bytes=1024):
    """A normal (non-confidential) load: *length* bytes read in the clear (``aes`` = 0,
    cleartext region 0) in reads of *block_bytes* into tile memory at *dest*, nothing
    checked or hashed — the baseline the encrypted boot is measured against."""
    for at in range(0, length, block_bytes):
        n = min(block_bytes, length - at)
        data = yield Read(addr + at, n, 0, aes=0)
        tile.memory[dest + at:dest + at + n] = data


def read_stream(tile, sl, dest):
    """Data-stream reader: frames of *sl* into tile memory at *dest*."""
    yield from _read_frames(tile, sl, sl.nonce, dest)


def write_checkpoint(tile, slot, src):
    """Checkpoint writer: tile memory [src, src + slot.length) as frames with IVs from the
    tile's epoch counter and checkpoint id; then the checkpoint id advances."""
    size = payload_bytes(slot.frame_bytes)
    state = bytes(tile.memory[src:src + slot.length])
    for i in range(frame_count(slot.length, slot.frame_bytes)):
        nonce = checkpoint_nonce(tile.epoch, tile.checkpoint, tile.ipu, tile.id, i)
        body = state[i * size:(i + 1) * size].ljust(size, b"\0")
        yield Write(slot.addr + i * slot.frame_bytes, iv_block(nonce) + body + bytes(TAG_BYTES),
                    slot.xbctx)
    tile.checkpoint += 1


def read_checkpoint(tile, slot, dest):
    """Checkpoint reader (resumption): if the epoch counter is not null, read checkpoint
    (epoch, checkpoint id) into tile memory at *dest*; then the epoch advances."""
    if tile.epoch:
        sl = StreamSlice(StreamType.CHECKPOINT, 0, slot.addr, slot.frame_bytes, slot.length,
                         slot.xbctx)
        yield from _read_frames(tile, sl, lambda i: checkpoint_nonce(tile.epoch, tile.checkpoint,
                                                                     tile.ipu, tile.id, i), dest)
    tile.epoch += 1


# ---- measurement ------------------------------------------------------------------
def tile_digest(binary):
    return hashlib.sha384(binary).digest()


def application_measurement(digests):
    """The application binary's measurement from each tile's digest: SHA-384 over
    "ITX-APP" ‖ (u16 tile id ‖ digest) in ascending tile order (docs/itx.md)."""
    h = hashlib.sha384(b"ITX-APP")
    for t in sorted(digests):
        h.update(t.to_bytes(2, "big") + digests[t])
    return h.digest()


def check_measurement(tiles, expected):
    """The CCU's check after boot: every tile loaded, and the combined measurement equals
    the manifest's; else a MEASUREMENT security exception."""
    missing = [t.id for t in tiles if t.digest is None]
    if missing:
        raise SecurityException(Cause.MEASUREMENT, missing[0], f"tiles {missing} did not boot")
    got = application_measurement({t.id: t.digest for t in tiles})
    if got != expected:
        raise SecurityException(Cause.MEASUREMENT, None,
                                f"measurement {got.hex()[:16]}… is not the manifest's "
                                f"{expected.hex()[:16]}…")
    return got
