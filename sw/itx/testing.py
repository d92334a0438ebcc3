"""An independent reference of the SXP path for the shim and tile-model tests, built on
``cryptography`` (AESGCM for frames, AES-CTR for the streamed plaintext), not on our golden
models: :class:`ReferenceSxp` (key contexts, KXBCTXMAP/KPHYSMAP/KSELLIMIT checks, one read
per physical context, streaming decryption with the tag checked on the last completion),
:class:`ReferenceDevice` (tiles + reference SXP + :class:`~sw.itx.host.HostMemory`, run
packet by packet, one cycle per loop) and :class:`TrustedCcu` (installs the runtime's key
sets through any :class:`~sw.ccu.sxp_port.SxpKeyPort`; :class:`CcuJob` is the real CCU
firmware model for the same job, on a :class:`sw.itx.csr.CsrKeyPort`). Both devices run at
the lanes of their host memory (beats of 16·lanes bytes; a packet not on beats is refused,
as the SXP's MALFORMED check does).
"""
from collections import deque

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from hw.sxp.packet import BEAT_BYTES, Kind
from sw.ccu.sxp_port import PHYS_CONTEXTS, REGISTER_ENTRIES, SxpRegister
from sw.pcie.beats import Beat

from .frames import IV_BYTES, J0_TAIL, NONCE_BYTES, TAG_BYTES
from .host import HostMemory
from .tile import Cause, SecurityException, Tile

__all__ = ["ReferenceSxp", "ReferenceDevice", "TrustedCcu", "Scenario", "GoldenDevice", "CcuJob"]


def _payload(packet, beat_bytes=BEAT_BYTES):
    return b"".join(b.data.to_bytes(beat_bytes, "little")
                    for b in packet)[:packet[0].hdr["length"]]


def _packet(hdr, data, beat_bytes=BEAT_BYTES):
    return [Beat(int.from_bytes(data[k:k + beat_bytes].ljust(beat_bytes, b"\0"), "little"),
                 dict(hdr), int(k == 0), int(k + beat_bytes >= len(data)))
            for k in range(0, len(data), beat_bytes)]


class ReferenceSxp:
    """SxpKeyPort on the CCU side; :meth:`host_write` is the host CSR port."""

    def __init__(self, lanes=1):
        self.beat_bytes = BEAT_BYTES * lanes
        self.keys = [None] * PHYS_CONTEXTS
        self.regs = {r: [0] * n for r, n in REGISTER_ENTRIES.items()}
        self.trusted = False
        self.exception = None           # latched cause (irq high while set)
        self.ignored_host_writes = self.ignored_ccu_writes = 0

    # SxpKeyPort (CCU)
    def install_key(self, phys_ctx, key):
        self.keys[phys_ctx] = bytes(key)

    def set_trusted_mode(self):
        self.trusted = True

    def write_config(self, register, index, value):
        """Refused in trusted mode, as the SXP refuses it (counted)."""
        if self.trusted:
            self.ignored_ccu_writes += 1
        else:
            self.regs[SxpRegister(register)][index] = value

    # host CSR port: locked in trusted mode
    def host_write(self, register, index, value):
        if self.trusted:
            self.ignored_host_writes += 1
        else:
            self.regs[SxpRegister(register)][index] = value

    def raise_exception(self, cause):
        if self.exception is None:
            self.exception = cause

    def route(self, hdr):
        """Physical context of a request, or None (exception raised) if it is not on beats
        or out of its region."""
        length = hdr["length"]
        if hdr["addr"] % self.beat_bytes or length % self.beat_bytes or not length:
            self.raise_exception(f"malformed: {hdr['addr']:#x}+{length} is not on "
                                 f"{self.beat_bytes}-byte beats")
            return None
        if hdr["aes"]:
            phys = self.regs[SxpRegister.KXBCTXMAP][hdr["xbctx"]]
            region = self.regs[SxpRegister.KPHYSMAP][phys]
        else:
            phys, region = 0, 0
        base = self.regs[SxpRegister.KSELLIMIT_BASE][region]
        limit = self.regs[SxpRegister.KSELLIMIT_LIMIT][region]
        if not (base <= hdr["addr"] and hdr["addr"] + length <= limit):
            self.raise_exception(f"region: {hdr['addr']:#x}+{length} not in region {region}")
            return None
        return phys

    def keystream_decrypt(self, phys, nonce, ct):
        key = self.keys[phys] or bytes(32)
        dec = Cipher(algorithms.AES(key), modes.CTR(nonce + (2).to_bytes(4, "big"))).decryptor()
        return dec.update(ct) + dec.finalize()

    def open_frame(self, phys, frame):
        """True if the frame authenticates under context *phys* (IV tail and tag)."""
        if self.keys[phys] is None or frame[NONCE_BYTES:IV_BYTES] != J0_TAIL:
            return False
        try:
            AESGCM(self.keys[phys]).decrypt(frame[:NONCE_BYTES], frame[IV_BYTES:], None)
            return True
        except InvalidTag:
            return False

    def seal_frame(self, phys, frame):
        """IV ‖ plaintext ‖ tag slot → IV ‖ ciphertext ‖ tag (None if it cannot)."""
        if self.keys[phys] is None or frame[NONCE_BYTES:IV_BYTES] != J0_TAIL:
            return None
        return frame[:IV_BYTES] + AESGCM(self.keys[phys]).encrypt(
            frame[:NONCE_BYTES], frame[IV_BYTES:-TAG_BYTES], None)


class ReferenceDevice:
    """Tiles, the reference SXP and host memory, moved one packet per loop iteration; beats
    of 16·lanes bytes, lanes taken from the host memory."""

    def __init__(self, tiles, host=None, sxp=None, seed=0, max_cycles=2_000_000):
        self.host = host if host is not None else HostMemory()
        self.lanes = self.host.lanes
        self.beat_bytes = self.host.beat_bytes
        self.sxp = sxp if sxp is not None else ReferenceSxp(self.lanes)
        self.tiles = {t: Tile(t, lanes=self.lanes) for t in tiles}
        self.max_cycles = max_cycles
        self.now = 0
        self.exception = None
        self.held = False        # the CCU held the tiles: nothing runs until a new device
        self._waiting = {p: deque() for p in range(PHYS_CONTEXTS)}   # reads queued per context
        self._busy = {}          # phys -> tag of its outstanding read
        self._reads = {}         # tag -> [tile, phys, addr, length, staged bytes, packets]
        self._writes = {}        # tile -> packets of an unfinished written frame
        self._tag = 0

    def tile(self, t):
        return self.tiles[t]

    def _in_flight(self):
        return bool(self._reads) or any(q for q in self._waiting.values())

    def _sxp_exception(self):
        """The latched SXP exception (what drives irq), or None."""
        return self.sxp.exception

    def hold_tiles(self):
        """The CCU's hold (its exception handler): every tile stops and stays stopped."""
        self.held = True
        self._halt_all(Cause.HELD, "held by the CCU")

    def _halt_all(self, cause, detail):
        for tile in self.tiles.values():
            if tile.exception is None and (tile.busy or tile.complete):
                tile.security_exception(cause, detail)
        if self.exception is None:
            self.exception = SecurityException(cause, None, detail)

    def _from_tile(self, tile, packet):
        h = packet[0].hdr
        phys = self.sxp.route(h)
        if phys is None:
            return
        if h["kind"] == Kind.READ_REQ.value:
            self._waiting[phys].append((tile.id, dict(h, key_index=phys)))
        else:
            frame = self._writes.setdefault(tile.id, [])
            frame.append(packet)
            if h["cc"]:
                del self._writes[tile.id]
                plain = b"".join(_payload(p, self.beat_bytes) for p in frame)
                sealed = self.sxp.seal_frame(phys, plain)
                if sealed is None:
                    self.sxp.raise_exception("write: no key or bad IV tail")
                    return
                at = 0
                for p in frame:
                    n = p[0].hdr["length"]
                    self.host.request(_packet(dict(p[0].hdr, key_index=phys), sealed[at:at + n],
                                              self.beat_bytes), self.now)
                    at += n

    def _issue_reads(self):
        for phys, q in self._waiting.items():
            if q and phys not in self._busy:
                tile, h = q.popleft()
                tag = self._tag = (self._tag + 1) % 256
                self._busy[phys] = tag
                self._reads[tag] = [tile, phys, h["addr"], h["length"], bytearray()]
                self.host.request([Beat(0, dict(h, tag=tag), 1, 1)], self.now)

    def _completion(self, packet):
        h = packet[0].hdr
        tile, phys, addr, length, staged = self._reads[h["tag"]]
        staged += _payload(packet, self.beat_bytes)
        last = len(staged) == length
        frame = bytes(staged)
        # streamed decryption: IV in clear, data through CTR, the tag slot as it came
        at = h["addr"] - addr
        out = bytearray(_payload(packet, self.beat_bytes))
        ks = self.sxp.keystream_decrypt(phys, frame[:NONCE_BYTES].ljust(NONCE_BYTES, b"\0"),
                                        bytes(length))
        for k in range(len(out)):
            pos = at + k
            if IV_BYTES <= pos < length - TAG_BYTES:
                out[k] ^= ks[pos - IV_BYTES]
        hdr = dict(h, tile=tile, key_index=phys, aes=1, cc=int(last), kind=Kind.READ_CPL.value)
        t = self.tiles[tile]
        complete = t.deliver(_packet(hdr, bytes(out), self.beat_bytes))
        if last:
            del self._reads[h["tag"]]
            del self._busy[phys]
            if not self.sxp.open_frame(phys, frame):
                self.sxp.raise_exception(f"authentication: tile {tile} frame at {addr:#x}")
            if self.sxp.exception is not None:
                self._halt_all(Cause.SXP_AUTH, self.sxp.exception)
            elif complete:
                t.commit()

    def run(self, job):
        """Run the tile programs of *job* (tile -> callable(tile) -> generator) to the end.
        Raises the first SecurityException (every tile halts on one); a held device
        runs nothing (SecurityException HELD)."""
        if self.held:
            raise SecurityException(Cause.HELD, None, "the CCU holds the tiles")
        for t, program in job.items():
            self.tiles[t].run(program(self.tiles[t]))
        start = self.now
        while True:
            for tile in self.tiles.values():
                while tile.outbox:
                    self._from_tile(tile, tile.outbox.popleft())
            if self._sxp_exception() is not None and self.exception is None:
                self._halt_all(Cause.SXP_AUTH, self._sxp_exception())
            self._issue_reads()
            packet = self.host.completion(self.now)
            if packet is not None:
                self._completion(packet)
            halted = [t.exception for t in self.tiles.values() if t.exception is not None]
            if halted or self.exception is not None:
                self._halt_all(halted[0].cause if halted else self.exception.cause,
                               str(halted[0] if halted else self.exception))
                raise halted[0] if halted else self.exception
            if not any(t.busy or t.outbox for t in self.tiles.values()) and not self._in_flight():
                return self.now - start
            self.now += 1
            if self.now - start > self.max_cycles:
                raise TimeoutError(f"tiles still busy after {self.max_cycles} cycles")


class TrustedCcu:
    """Plays the CCU's key installation: key set *n* of the runtime through an SxpKeyPort,
    with the key material it holds (``keys``: key id -> 32 bytes)."""

    def __init__(self, port, keys):
        self.port, self.keys = port, dict(keys)

    def launch(self, key_set, config=()):
        for c in config:
            self.port.write_config(c.register, c.index, c.value)
        self.port.set_trusted_mode()
        self.install(key_set)

    def install(self, key_set):
        for k in key_set:
            self.port.install_key(k.phys_ctx, self.keys[k.key_id])


class Scenario:
    """The issue's job, shared by the reference tests (sw/itx) and the RTL tests
    (tb/system): two parties — a model provider (code key) and a data provider (data
    key) — code streams for *tiles*, one data stream loaded after synchronisation point 1
    into the same physical context 0 (the key change), checkpoint slots on context 1 (the
    CCU's key of this epoch) and, when resuming, the checkpoint on context 2 (the key of
    the resumed epoch). ``epoch_keys`` plays the CCU's per-epoch checkpoint keys; ``lanes``
    is the beat width (16·lanes bytes) of the host memory, and so of the device's tiles."""

    SENTINEL = 0xA5
    STATE = 2048

    def __init__(self, seed=0, tiles=(0, 1, 5, 1471), code_bytes=3000, frame=512,
                 data_bytes=6000, data_frame=384, epoch_keys=None, contexts=16, host=None,
                 region_bytes=1 << 20, lanes=1):
        from .runtime import Runtime
        self.rng = rng = __import__("random").Random(seed)
        self.model_key, self.data_key = rng.randbytes(32), rng.randbytes(32)
        self.epoch_keys = epoch_keys or {e: rng.randbytes(32) for e in range(4)}
        self.tiles = tuple(tiles)
        self.binaries = {t: rng.randbytes(code_bytes + (16 * t) % 700) for t in tiles}
        host = host if host is not None else HostMemory(rng=rng, latency=(1, 30), lanes=lanes)
        if host.lanes != lanes:
            raise ValueError(f"host memory at lanes {host.lanes}, scenario at lanes {lanes}")
        self.lanes = lanes
        self.rt = Runtime(host, region_bytes=region_bytes, contexts=contexts)
        self.code = self.rt.code_stream(self.binaries, key=self.model_key, ctx=0,
                                        frame_bytes=frame)
        self.batch = rng.randbytes(data_bytes)
        self.data = self.rt.data_stream(self.batch, key=self.data_key, readers=tiles, ctx=0,
                                        key_set=1, frame_bytes=data_frame)
        self.plan = self.rt.checkpoint_slots(tiles, self.STATE, ctx=1)

    def key_sets(self, epoch=1, resume_epoch=None):
        """(key sets, key material by id) for the CCU of a run in *epoch*."""
        from sw.ccu.manifest import KEY_CHECKPOINT, KEY_RESUME_CHECKPOINT
        extra = {0: {1: KEY_CHECKPOINT}}
        keys = {**self.rt.keys, KEY_CHECKPOINT: self.epoch_keys[epoch]}
        if resume_epoch is not None:
            extra[0][2] = KEY_RESUME_CHECKPOINT
            keys[KEY_RESUME_CHECKPOINT] = self.epoch_keys[resume_epoch]
        return self.rt.key_sets(extra), keys

    def prepare(self, tiles):
        """Fill tile memories with a sentinel (so a landed byte shows) and zero the state."""
        from .runtime import STATE_BASE, STATE_BYTES
        for tile in tiles.values():
            tile.memory[:] = bytes([self.SENTINEL]) * len(tile.memory)
            tile.memory[STATE_BASE:STATE_BASE + STATE_BYTES] = bytes(STATE_BYTES)

    def frame_addr(self, t, i):
        s = self.code[t]
        return s.addr + i * s.frame_bytes

    def flip(self, addr, byte, bit=0):
        v = bytearray(self.rt.host.read(addr + byte, 1))
        v[0] ^= 1 << bit
        self.rt.host.write(addr + byte, bytes(v))


class GoldenDevice(ReferenceDevice):
    """The same device around the SXP golden model (:class:`sw.sxp.model.SxpModel`), with
    a small read table in front of it as ``pcie_rdtable`` behaves for a legal host: the
    completion header gets tile, ``key_index`` and ``aes`` from the tag's entry and ``cc``
    on the completion that finishes the read. The shim reaches it only through CSR writes:
    :attr:`host_csr` / :attr:`ccu_csr` (``write32`` callables for
    :class:`sw.itx.csr.CsrConfigWriter` / :class:`sw.itx.csr.CsrKeyPort`), and the CCU reads
    its port with :attr:`ccu_read32` and holds the tiles with :meth:`hold_tiles`."""

    def __init__(self, tiles, host=None, contexts=16, **kw):
        from sw.sxp.driver import ModelBus
        from sw.sxp.model import SxpModel
        super().__init__(tiles, host=host, **kw)
        self.model = SxpModel(contexts, self.lanes)
        self.host_csr, self.ccu_csr = ModelBus(self.model, "host"), ModelBus(self.model, "ccu")
        self.ccu_read32 = lambda addr: self.model.csr_read(addr, "ccu")
        self._table = {}         # tag -> [tile, key_index, aes, bytes left]
        self._xb = deque()       # packets waiting to enter xb_i

    def _blocks(self, packet):
        return [b.data for b in packet]

    def _to_host(self, packets):
        for p in packets:
            h = {k: int(getattr(v, "value", v)) for k, v in p.hdr.items()}
            if h["kind"] == Kind.READ_REQ.value:
                tag = next(t for t in range(256) if t not in self._table)
                self._table[tag] = [h["tile"], h["key_index"], h["aes"], h["length"]]
                h["tag"] = tag
            self.host.request(_beats(h, p.data), self.now)

    def _from_tile(self, tile, packet):
        self._xb.append(packet)

    def _issue_reads(self):
        # xb_i in order; a read to a context whose read is outstanding and whose holding
        # slot is full stalls the port (as the RTL does)
        m = self.model
        while self._xb:
            h = self._xb[0][0].hdr
            phys = m.kxbctxmap(h["xbctx"])
            if h["kind"] == Kind.READ_REQ.value and h["aes"] and phys < m.contexts and \
                    m.rd_busy[phys] and m.slot[phys] is not None:
                return
            packet = self._xb.popleft()
            self._to_host(m.request(packet[0].hdr, self._blocks(packet)))

    def _completion(self, packet):
        h = dict(packet[0].hdr)
        entry = self._table[h["tag"]]
        entry[3] -= h["length"]
        h.update(tile=entry[0], key_index=entry[1], aes=entry[2], cc=int(entry[3] == 0),
                 kind=Kind.READ_CPL.value)
        if entry[3] == 0:
            del self._table[h["tag"]]
        out, released = self.model.completion(h, self._blocks(packet))
        self._to_host(released)
        for p in out:
            hh = {k: int(getattr(v, "value", v)) for k, v in p.hdr.items()}
            t = self.tiles[hh["tile"]]
            complete = t.deliver(_beats(hh, p.data))
            if complete:
                if self.model.exc:
                    self._halt_all(Cause.SXP_AUTH, str(self.model.record))
                else:
                    t.commit()

    def _sxp_exception(self):
        return self.model.record if self.model.exc else None

    def _in_flight(self):
        return bool(self._table) or bool(self._xb) or any(s is not None for s in self.model.slot)


def _beats(hdr, blocks):
    return [Beat(d, dict(hdr), int(k == 0), int(k == len(blocks) - 1))
            for k, d in enumerate(blocks)]


class CcuJob:
    """The real CCU firmware model (:mod:`sw.ccu`) for a :class:`Scenario`: a device
    provisioned by a manufacturer CA and booted on *port* (a
    :class:`sw.ccu.sxp_port.CcuPort`: the golden model's or the RTL's), the job manifest
    (the runtime's measurement, key schedule and SXP configuration; the CCU derives the
    checkpoint key of context 1) and both parties, whose key packages answer the CCU's
    attestation report. :meth:`launch` is the CCU side of a job start: create the TEE
    (the manifest's whole configuration written, trusted mode entered, bit and
    configuration read back), attest, unwrap the two packages, launch (key set 0 over the
    port)."""

    MODEL, DATA = 1, 2

    def __init__(self, sc, port, job_id=b"itx-issue-6-job!", resume_ctx=None):
        from sw.ccu.ca import ManufacturerCA
        from sw.ccu.certs import fingerprint
        from sw.ccu.device import Device
        from sw.ccu.manifest import KEY_CHECKPOINT, KEY_RESUME_CHECKPOINT, JobManifest, PartyEntry
        from sw.ccu.testing import firmware, make_identities, make_parties
        ca = ManufacturerCA()
        bundle = firmware(ca)
        self.device = Device(bundle, ca.firmware_public_key, port, trng=lambda n: bytes(range(n)))
        ca.provision(self.device)
        self.cce = self.device.cce
        code_id, data_id = sc.rt.key_id(sc.model_key), sc.rt.key_id(sc.data_key)
        self.ids = make_identities(self.MODEL, self.DATA)
        self.job = JobManifest(
            job_id=job_id, binary_measurement=sc.rt.measurement(),
            parties=(PartyEntry(self.MODEL, fingerprint(self.ids[self.MODEL][1]), (code_id,)),
                     PartyEntry(self.DATA, fingerprint(self.ids[self.DATA][1]), (data_id,))),
            key_sets=sc.rt.key_sets({0: {1: KEY_CHECKPOINT} if resume_ctx is None else
                                     {1: KEY_CHECKPOINT, resume_ctx: KEY_RESUME_CHECKPOINT}}),
            sxp_config=sc.rt.sxp_config())
        self.parties = make_parties(ca, ca.reference_certificate(bundle), self.ids, self.job)
        self._keys = {self.MODEL: {code_id: sc.model_key}, self.DATA: {data_id: sc.data_key}}

    def launch(self, resume=None, resume_nonce=None):
        """Create, attest, submit both parties' packages, launch; returns the CCU's
        :class:`~sw.ccu.cce.LaunchInfo`. *resume* (a :class:`~sw.ccu.cce.ResumePoint`): a
        run that resumes from a checkpoint of that epoch, whose key the CCU derives from
        the parties' *resume_nonce* (the nonce each gave the run that wrote it; the
        manifest must load KEY_RESUME_CHECKPOINT: ``resume_ctx``)."""
        self.cce.create_tee(self.job, [cert for _, cert in self.ids.values()], resume)
        evidence = self.cce.get_attestation_report()
        epoch = 0 if resume is None else resume.epoch + 1
        ckpt = 0 if resume is None else resume.checkpoint_id
        for pid, keys in self._keys.items():
            party = self.parties[pid]
            verified = party.verify(evidence, epoch=epoch, checkpoint_id=ckpt)
            self.cce.submit_key_package(party.wrap_keys(verified, keys, resume_nonce=resume_nonce))
        return self.cce.launch()
