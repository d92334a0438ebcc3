"""The host driver shim: what the untrusted runtime does for an ITX job.

It creates confidential streams and encrypts them into frames (acting for the party that
owns each key), places them in the host ring buffer inside the key region of their
physical key context, computes the SXP configuration (KXBCTXMAP, KPHYSMAP, KSELLIMIT) and
the key schedule (key sets for the CCU: set 0 at launch, set *i* at synchronisation point
*i*), and hands out the tile programs of each phase (boot, step, checkpoint, resume).
docs/itx.md has the walk-through; in ten lines::

    rt = Runtime(HostMemory())
    rt.code_stream(binaries, key=model_key, ctx=0)           # party A: one stream per tile
    data = rt.data_stream(batch, key=data_key, ctx=0, key_set=1, readers=tiles)  # party B
    ckpt = rt.checkpoint_slots(tiles, STATE_BYTES, ctx=1)    # CCU-derived checkpoint key
    rt.configure(sxp_host_write)                             # (register, index, value)
    ccu.install(rt.key_sets()[0])                            # SxpKeyPort: trusted port
    device.run(rt.boot()); check_measurement(tiles, rt.measurement())
    ccu.install(rt.key_sets()[1]); device.run(rt.step(data)) # sync point: key change
    device.run(rt.checkpoint(ckpt)); saved = rt.save(ckpt)

Placement: physical key context *p* is reached from exchange-block context *p*
(KXBCTXMAP[p] = p) and owns key region *p* + 1 (KPHYSMAP[p] = p + 1), a window of the
ring of ``region_bytes`` bytes allocated when the context is first used (KSELLIMIT[p + 1]);
unused regions are empty. Region 0 (cleartext) is empty unless :meth:`Runtime.clear_code`
places data there: the non-confidential baseline a benchmark compares the encrypted boot
with (the tiles read it with ``aes`` = 0, nothing is checked).

Lanes: the runtime works at the lanes of its host memory (``HostMemory(lanes=L)``, beats of
16·L bytes). The SXP drops every packet whose address or length is not a multiple of 16·L,
so the layout keeps everything on beats at L = 1, 2, 4: regions start on pages, frames on
1 KiB lines, frames are 128·n bytes and the tiles' write packets ≤ 256-byte cuts of them
(multiples of 128), and completions split at the 64-byte completion boundary.
"""
from dataclasses import dataclass, field

from sw.ccu.manifest import ConfigWrite, KeyInstall
from sw.ccu.sxp_port import PHYS_CONTEXTS, SxpRegister

from .frames import (
    FrameError,
    FrameTypeError,
    StreamType,
    check_frame_bytes,
    encrypt_stream,
    frame_count,
    stream_nonce,
)
from .host import PAGE, HostMemory
from .tile import (
    CheckpointSlot,
    StreamSlice,
    application_measurement,
    bootloader,
    clear_loader,
    read_checkpoint,
    read_stream,
    tile_digest,
    write_checkpoint,
)

__all__ = ["Runtime", "Stream", "CheckpointPlan", "SavedCheckpoint", "CODE_BASE",
           "DATA_BASE", "STATE_BASE", "STATE_BYTES", "REGIONS", "compute_step"]

REGIONS = PHYS_CONTEXTS + 1    # KSELLIMIT entries: region 0 cleartext, 1..16 keyed
# Tile memory map the compiler fixes (bytes; GC200 tile: 624 KiB)
CODE_BASE = 0x00000            # the binary, loaded by the bootloader
DATA_BASE = 0x70000            # input data buffer of a step
STATE_BASE = 0x88000           # the tile's state ("weights"), checkpointed
STATE_BYTES = 0x14000          # at most 80 KiB of state


@dataclass
class Stream:
    type: StreamType
    id: int
    key_id: int
    ctx: int                   # physical key context (= exchange-block context)
    key_set: int               # installed at launch (0) or at synchronisation point n
    addr: int                  # tile PCI address of frame 0
    frame_bytes: int
    length: int
    readers: dict = field(default_factory=dict)   # tile -> StreamSlice

    @property
    def frames(self):
        return frame_count(self.length, self.frame_bytes)

    @property
    def size(self):
        return self.frames * self.frame_bytes


@dataclass
class CheckpointPlan:
    ctx: int
    slots: dict                # tile -> CheckpointSlot


@dataclass
class SavedCheckpoint:
    """What the runtime keeps of a checkpoint outside the ring (encrypted blobs) and the
    plaintext metadata it needs to resume (epoch and checkpoint id, per ITX)."""
    epoch: int
    checkpoint: int
    frame_bytes: int
    length: int
    blobs: dict                # tile -> bytes


class Runtime:
    def __init__(self, host=None, region_bytes=16 << 20, contexts=PHYS_CONTEXTS):
        self.host = host if host is not None else HostMemory()
        if not isinstance(contexts, int) or not 1 <= contexts <= PHYS_CONTEXTS:
            raise ValueError(f"contexts must be 1..{PHYS_CONTEXTS}, not {contexts!r}")
        self.contexts = contexts
        if region_bytes % PAGE or region_bytes <= 0:
            raise ValueError(f"region size {region_bytes} must be a positive multiple of {PAGE}")
        self.region_bytes = region_bytes
        self.lanes = self.host.lanes
        self.regions = {}          # ctx -> [base, limit, cursor]
        self.clear = None          # region 0: [base, limit, cursor], allocated on first use
        self.clear_loads = {}      # tile -> (addr, length) of its cleartext binary
        self.streams = []
        self.keys = {}             # key id -> key (the runtime encrypts for the parties)
        self.schedule = {}         # key set -> {ctx: key id}
        self.binaries = {}         # tile -> plaintext binary (for the manifest's measurement)
        self._next_stream = {StreamType.CODE: 0, StreamType.DATA: 0}

    # ---- keys and placement ------------------------------------------------------------
    def key_id(self, key):
        """The id of *key* (new keys get the next id from 1)."""
        for kid, k in self.keys.items():
            if k == key:
                return kid
        kid = len(self.keys) + 1
        self.keys[kid] = bytes(key)
        return kid

    def _schedule(self, key_set, ctx, key_id):
        if not 0 <= ctx < self.contexts:
            raise ValueError(f"physical key context {ctx} is not 0..{self.contexts - 1}")
        have = self.schedule.setdefault(key_set, {}).get(ctx)
        if have is not None and have != key_id:
            raise ValueError(f"key set {key_set} already puts key {have} in context {ctx}")
        self.schedule[key_set][ctx] = key_id

    def _place(self, ctx, nbytes):
        """Room for *nbytes* in the key region of *ctx* (None: the cleartext region 0)."""
        if ctx is None:
            if self.clear is None:
                base = self.host.alloc(self.region_bytes)
                self.clear = [base, base + self.region_bytes, base]
            region = self.clear
        else:
            if ctx not in self.regions:
                base = self.host.alloc(self.region_bytes)
                self.regions[ctx] = [base, base + self.region_bytes, base]
            region = self.regions[ctx]
        addr = -(-region[2] // 1024) * 1024        # frames never straddle a 1 KiB line
        if addr + nbytes > region[1]:
            raise MemoryError(f"{'cleartext region' if ctx is None else f'key region of context {ctx}'}"
                              f" ({self.region_bytes} bytes) is full")
        if addr % self.host.beat_bytes or nbytes % self.host.beat_bytes:
            raise ValueError(f"{nbytes} bytes at {addr:#x} are not on {self.host.beat_bytes}-"
                             f"byte beats (lanes {self.lanes})")
        region[2] = addr + nbytes
        return addr

    # ---- streams ------------------------------------------------------------------------
    def _stream(self, stype, data, key, ctx, key_set, frame_bytes):
        check_frame_bytes(frame_bytes)
        kid = self.key_id(key)
        if stype is not StreamType.CHECKPOINT:
            self._schedule(key_set, ctx, kid)
        sid = self._next_stream[stype]
        self._next_stream[stype] += 1
        s = Stream(stype, sid, kid, ctx, key_set, 0, frame_bytes, len(data))
        s.addr = self._place(ctx, s.size)
        self.host.write(s.addr, encrypt_stream(key, lambda i: stream_nonce(stype, sid, i),
                                               data, frame_bytes))
        self.streams.append(s)
        return s

    def code_stream(self, binaries, key, ctx=0, key_set=0, frame_bytes=1024):
        """Encrypt each tile's binary into its own code stream (ids in tile order)."""
        out = {}
        for t in sorted(binaries):
            s = self._stream(StreamType.CODE, binaries[t], key, ctx, key_set, frame_bytes)
            s.readers[t] = StreamSlice(StreamType.CODE, s.id, s.addr, frame_bytes, s.length, ctx)
            self.binaries[t] = bytes(binaries[t])
            out[t] = s
        return out

    def clear_code(self, binaries):
        """Each tile's binary in the clear, in region 0 (no frames, no key): for
        :meth:`clear_boot`, the non-confidential baseline."""
        for t in sorted(binaries):
            data = bytes(binaries[t])
            size = -(-len(data) // self.host.beat_bytes) * self.host.beat_bytes
            addr = self._place(None, size)
            self.host.write(addr, data.ljust(size, b"\0"))
            self.clear_loads[t] = (addr, size)

    def data_stream(self, data, key, readers, ctx=0, key_set=0, frame_bytes=512):
        """One data stream whose frames are shared out among *readers* in contiguous runs."""
        s = self._stream(StreamType.DATA, data, key, ctx, key_set, frame_bytes)
        readers = sorted(readers)
        n = s.frames
        for k, t in enumerate(readers):
            lo, hi = n * k // len(readers), n * (k + 1) // len(readers)
            if hi > lo:
                s.readers[t] = StreamSlice(StreamType.DATA, s.id, s.addr, frame_bytes, s.length,
                                           ctx, first=lo, count=hi - lo)
        return s

    def checkpoint_slots(self, tiles, length, ctx, frame_bytes=1024):
        """A slot per tile in the key region of *ctx* for the tile's part of a checkpoint."""
        if not 0 < length <= STATE_BYTES:
            raise ValueError(f"state of {length} bytes: 1..{STATE_BYTES}")
        size = frame_count(length, frame_bytes) * frame_bytes
        return CheckpointPlan(ctx, {t: CheckpointSlot(self._place(ctx, size), frame_bytes,
                                                      length, ctx) for t in sorted(tiles)})

    # ---- configuration and key schedule ---------------------------------------------------
    def sxp_config(self):
        """The SXP register writes for this job, as the manifest's ConfigWrite entries."""
        cfg = []
        for x in range(PHYS_CONTEXTS):          # 16 exchange-block contexts, identity
            cfg.append(ConfigWrite(SxpRegister.KXBCTXMAP, x, x))
        for p in range(self.contexts):          # every context mapped: KPHYSMAP is 1:1
            cfg.append(ConfigWrite(SxpRegister.KPHYSMAP, p, p + 1))
        for r in range(REGIONS):
            if r == 0:
                base, limit = self.clear[:2] if self.clear is not None else (0, 0)
            else:
                base, limit = self.regions[r - 1][:2] if r - 1 in self.regions else (0, 0)
            cfg.append(ConfigWrite(SxpRegister.KSELLIMIT_BASE, r, base))
            cfg.append(ConfigWrite(SxpRegister.KSELLIMIT_LIMIT, r, limit))
        return tuple(cfg)

    def configure(self, write):
        """Program the SXP over the host CSR port: ``write(register, index, value)`` for each
        entry (bind it to the golden model or to the RTL's host port)."""
        for c in self.sxp_config():
            write(c.register, c.index, c.value)

    def key_sets(self, extra=None):
        """Key sets for the CCU (tuple of tuples of KeyInstall): set 0 at launch, set *n* at
        synchronisation point *n*. *extra* maps set -> {ctx: key id} for keys the CCU
        derives itself (checkpoint keys, sw.ccu.manifest.DERIVED_KEYS)."""
        sets = {k: dict(v) for k, v in self.schedule.items()}
        for n, installs in (extra or {}).items():
            sets.setdefault(n, {}).update(installs)
        last = max(sets, default=-1)
        return tuple(tuple(KeyInstall(c, kid) for c, kid in sorted(sets.get(n, {}).items()))
                     for n in range(last + 1))

    def measurement(self):
        """The binary measurement for the manifest (what the tiles' hashes must give)."""
        return application_measurement({t: tile_digest(b) for t, b in self.binaries.items()})

    # ---- phases: tile programs (tile id -> callable(tile) -> generator) --------------------
    def boot(self, resume=None):
        """Bootloader on every tile with a code stream; with *resume* (a CheckpointPlan from
        :meth:`restore`), each tile then reads its part of the checkpoint."""
        job = {}
        for s in self.streams:
            if s.type is StreamType.CODE:
                for t, sl in s.readers.items():
                    slot = resume.slots.get(t) if resume is not None else None
                    job[t] = _boot_program(sl, slot)
        return job

    def clear_boot(self, block_bytes=1024):
        """The baseline load: every tile of :meth:`clear_code` reads its binary in the clear
        into tile memory at CODE_BASE, *block_bytes* per read."""
        return {t: (lambda tile, a=addr, n=size: clear_loader(tile, a, n, CODE_BASE, block_bytes))
                for t, (addr, size) in self.clear_loads.items()}

    def step(self, stream, compute=True):
        """A step: each reader tile reads its frames of *stream* into its data buffer and
        (if *compute*) folds them into its state (:func:`compute_step`)."""
        return {t: _step_program(sl, compute) for t, sl in stream.readers.items()}

    def checkpoint(self, plan):
        return {t: (lambda tile, slot=slot: write_checkpoint(tile, slot, STATE_BASE))
                for t, slot in plan.slots.items()}

    def save(self, plan, epoch, checkpoint):
        """Copy the tiles' encrypted checkpoint out of the ring (with its plaintext
        metadata: the epoch and checkpoint id the tiles wrote it under)."""
        slots = list(plan.slots.values())
        return SavedCheckpoint(epoch, checkpoint, slots[0].frame_bytes, slots[0].length,
                               {t: self.host.read(s.addr, frame_count(s.length, s.frame_bytes)
                                                  * s.frame_bytes)
                                for t, s in plan.slots.items()})

    def restore(self, saved, ctx):
        """Put a saved checkpoint back into the ring, in the region of *ctx* (the context
        the CCU loads with the resumed epoch's key); returns the slots for :meth:`boot`.

        Every blob must be the whole encrypted slot: ``frame_count(length, frame_bytes)``
        frames of ``frame_bytes``. A blob that is not bytes raises :class:`FrameTypeError`,
        one of another size (truncated, extended) :class:`FrameError`, and an illegal
        ``frame_bytes`` or ``length`` FrameError (:func:`frame_count`) or ValueError
        (:meth:`checkpoint_slots`); all before anything is allocated or written, so a
        short blob never reaches the ring to fail later in the tile."""
        size = frame_count(saved.length, saved.frame_bytes) * saved.frame_bytes
        for t, blob in saved.blobs.items():
            if not isinstance(blob, (bytes, bytearray)):
                raise FrameTypeError(f"tile {t}'s saved checkpoint is a {type(blob).__name__}, not bytes")
            if len(blob) != size:
                raise FrameError(f"tile {t}'s saved checkpoint is {len(blob)} bytes, not the {size} of "
                                 f"{saved.length} bytes in {saved.frame_bytes}-byte frames")
        plan = self.checkpoint_slots(saved.blobs, saved.length, ctx, saved.frame_bytes)
        for t, slot in plan.slots.items():
            self.host.write(slot.addr, saved.blobs[t])
        return plan


def _boot_program(code, slot):
    def program(tile):
        yield from bootloader(tile, code, CODE_BASE)
        if slot is None and tile.epoch:
            raise ValueError(f"tile {tile.id} has epoch {tile.epoch} but no checkpoint to read")
        yield from read_checkpoint(tile, slot, STATE_BASE)   # epoch 0: only counts the epoch
    return program


def _step_program(sl, compute):
    def program(tile):
        yield from read_stream(tile, sl, DATA_BASE)
        if compute:
            n = sum(min(sl.frame_bytes - 32, max(0, sl.length - i * (sl.frame_bytes - 32)))
                    for i in sl.frames())
            compute_step(tile, n)
    return program


def compute_step(tile, data_bytes):
    """The toy computation of a step: the state becomes state ⊕ (data repeated), then
    rotated by one byte, so a checkpoint depends on every step and every data byte."""
    state = tile.memory[STATE_BASE:STATE_BASE + STATE_BYTES]
    data = bytes(tile.memory[DATA_BASE:DATA_BASE + data_bytes]) or b"\0"
    reps = -(-len(state) // len(data))
    mixed = int.from_bytes(state, "little") ^ int.from_bytes((data * reps)[:len(state)], "little")
    out = mixed.to_bytes(len(state), "little")
    tile.memory[STATE_BASE:STATE_BASE + STATE_BYTES] = out[1:] + out[:1]
