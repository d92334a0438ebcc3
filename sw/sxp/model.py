"""Packet-level golden model of the Secure Exchange Pipe (DESIGN.md § sxp; docs/sxp.md).

The same registers as the RTL (built from :func:`hw.sxp.regs.register_map`), the same
checks and causes (:class:`hw.sxp.regs.Cause`) and the same engine (:class:`sw.gcm.model.
GcmCoreModel`, one op per beat in packet order). Call :meth:`SxpModel.request` for every
packet the SXP accepts on ``xb_i`` and :meth:`SxpModel.completion` for every packet on
``pcie_i``, in the order the SXP accepts their **last** beats (a request before a
completion accepted in the same cycle); they return what leaves on ``pcie_o`` / ``xb_o``.

Lanes (``SxpModel(contexts, lanes)``): a beat carries ``lanes`` blocks, 16·lanes bytes, as one
int (lane *k* in bits 128k+127..128k); every address and length is then checked to be a
multiple of 16·lanes (else MALFORMED). Each direction has its own engine (two
:class:`~sw.gcm.model.GcmCoreModel`, as the RTL has two ``gcm_core``): a key commit installs
the key into both, and a write frame and a read frame on one physical context are
independent. A read frame's last beat (lanes 0..L−2 its last data blocks, lane L−1 the tag
slot) leaves all zero when the tag does not verify or the engine refused it.

What the model does not say: the cycle-level interleaving of the two directions and of
parked reads with other traffic (it keeps per-direction order only; parked reads leave
when their context is released, in some order relative to other ``pcie_o`` packets), and
which of several exceptions in one cycle is latched first.

Framing (docs/sxp.md "Malformed framing"): a packet that passes its check leaves with
exactly ``hdr.length / (16·lanes)`` beats. If the beats given differ from that, the beat at which
the difference shows (the declared last beat when there are more, the real last one when
there are fewer) and every beat after it up to the declared length leave as zero, extra
beats are dropped, MALFORMED is raised once, and a frame open on the context in that
direction is abandoned (engine op IV with block 0 on the active context).
"""
from dataclasses import dataclass, field

from hw.csr import Access
from hw.gcm.layout import check_contexts
from hw.sxp.packet import BEAT_BYTES, MAX_FRAME_BYTES, MAX_PAYLOAD_BYTES, Kind
from hw.sxp.regs import (
    ADDR_KEY,
    ADDR_KEY_COMMIT,
    KEY_WORDS,
    REGIONS,
    XBCTX_ENTRIES,
    Cause,
    is_config_register,
    register_map,
)
from sw.common import packet
from sw.gcm.model import GcmCoreModel, Op

__all__ = ["Packet", "SxpModel", "ModelError", "Exc", "HEADER_FIELDS", "header"]

HEADER_FIELDS = list(packet.HEADER_FIELDS)


def header(**fields):
    """A full header dict (missing fields zero, ``kind`` a :class:`Kind` member):
    :func:`sw.common.packet.header`, range-checked like it."""
    return packet.header(kind_enum=True, **fields)


@dataclass
class Packet:
    """A packet: header dict and one data int per beat (a read request has one beat, 0)."""
    hdr: dict
    data: list = field(default_factory=lambda: [0])

    def beats(self):
        """``[{data, hdr, first, last}]`` as on the stream."""
        n = len(self.data)
        return [{"data": d, "hdr": dict(self.hdr), "first": int(k == 0), "last": int(k == n - 1)}
                for k, d in enumerate(self.data)]


@dataclass(frozen=True)
class Exc:
    cause: Cause
    tile: int
    addr: int
    kind: int


class ModelError(AssertionError):
    """The caller fed the model something the SXP cannot have accepted."""


class SxpModel:
    def __init__(self, contexts=16, lanes=1):
        self.contexts = check_contexts(contexts)
        if isinstance(lanes, bool) or lanes not in (1, 2, 4):
            raise ValueError(f"lanes must be 1, 2 or 4, not {lanes!r}")
        self.lanes = lanes
        self.beat_bytes = BEAT_BYTES * lanes
        self.regmap = register_map(contexts)
        self._by_addr = {r.addr: r for r in self.regmap}
        self.reset()

    # ------------------------------------------------------------------ state
    def reset(self):
        """Reset: keys scrubbed, configuration to reset values, trusted mode off."""
        n = self.contexts
        self.stored = {r.name: {f.name: f.reset for f in r.fields if f.access.stored}
                       for r in self.regmap}
        self.gcm_w = GcmCoreModel(n, self.lanes)     # write requests (encrypt)
        self.gcm_r = GcmCoreModel(n, self.lanes)     # read completions (decrypt)
        self.key_stage = [0] * KEY_WORDS
        self.trusted = False
        self.record = Exc(Cause.NONE, 0, 0, 0)
        self.exc_count = 0
        self.denied = 0
        self.exceptions = []          # every Exc raised, in order
        self.wopen = [False] * n
        self.ropen = [False] * n
        self.rd_busy = [False] * n
        self.slot = [None] * n

    @property
    def exc(self):
        return bool(self.stored["STATUS"]["exc"])

    def kxbctxmap(self, i):
        return self.stored[f"KXBCTXMAP{i}"]["phys"]

    def kphysmap(self, p):
        return self.stored[f"KPHYSMAP{p}"]["region"]

    def region(self, r):
        return self.stored[f"KSEL_BASE{r}"]["addr"], self.stored[f"KSEL_LIMIT{r}"]["addr"]

    def config_ok(self):
        """Trusted mode may be entered: KPHYSMAP 1:1 onto regions 1..16, regions disjoint."""
        regions = [self.kphysmap(p) for p in range(self.contexts)]
        if not all(1 <= r < REGIONS for r in regions) or len(set(regions)) != len(regions):
            return False
        spans = [self.region(r) for r in range(REGIONS)]
        for i in range(REGIONS):
            for j in range(i + 1, REGIONS):
                (bi, li), (bj, lj) = spans[i], spans[j]
                if bi < li and bj < lj and bi < lj and bj < li:
                    return False
        return True

    def _raise(self, cause, hdr):
        e = Exc(cause, hdr["tile"], hdr["addr"], int(getattr(hdr["kind"], "value", hdr["kind"]))) \
            if hdr is not None else Exc(cause, 0, 0, 0)
        self.exceptions.append(e)
        self.exc_count = (self.exc_count + 1) & 0xFFFF_FFFF
        if not self.exc:
            self.record = e
            self.stored["STATUS"]["exc"] = 1

    # ------------------------------------------------------------------ registers
    def csr_write(self, port, addr, value):
        """A write on CSR port *port* ("ccu" or "host"); False if refused."""
        if port not in ("ccu", "host"):
            raise ValueError(f"no CSR port {port!r}")
        reg = self._by_addr.get(addr)
        if reg is None:
            return True
        # trusted mode: the host changes nothing, the ccu cannot change the configuration
        # that was checked on entry (both refusals count in DENIED)
        if self.trusted and (port == "host" or is_config_register(reg)):
            self.denied = (self.denied + 1) & 0xFFFF_FFFF
            return False
        for f in reg.fields:
            v = (value >> f.offset) & ((1 << f.width) - 1)
            if f.access in (Access.RW, Access.WO):
                self.stored[reg.name][f.name] = v
            elif f.access is Access.W1C:
                self.stored[reg.name][f.name] &= ~v
            elif f.access is Access.W:
                self._strobe(reg, v)
        return True

    def _strobe(self, reg, v):
        if ADDR_KEY <= reg.addr < ADDR_KEY + 4 * KEY_WORDS:
            self.key_stage[(reg.addr - ADDR_KEY) // 4] = v
        elif reg.addr == ADDR_KEY_COMMIT:
            key = sum(w << (32 * k) for k, w in enumerate(self.key_stage))
            self.gcm_w.install_key(v, key)
            self.gcm_r.install_key(v, key)
            self.key_stage = [0] * KEY_WORDS
        elif reg.name == "CTRL":
            if v & 1 and not self.trusted:
                if self.config_ok():
                    self.trusted = True
                else:
                    self._raise(Cause.CONFIG, None)

    def csr_read(self, addr, port="ccu"):
        """What a read of *addr* on CSR port *port* returns. In trusted mode a host read of a
        register returns zero and counts in DENIED (the host sees neither configuration nor
        exception record)."""
        if port not in ("ccu", "host"):
            raise ValueError(f"no CSR port {port!r}")
        reg = self._by_addr.get(addr)
        if reg is None:
            return 0
        if port == "host" and self.trusted:
            self.denied = (self.denied + 1) & 0xFFFF_FFFF
            return 0
        hw = {
            ("STATUS", "trusted"): int(self.trusted), ("STATUS", "key_busy"): 0,
            ("STATUS", "cause"): self.record.cause.value,
            ("EXC_ADDR", "addr"): self.record.addr, ("EXC_TILE", "tile"): self.record.tile,
            ("EXC_TILE", "kind"): self.record.kind, ("EXC_COUNT", "count"): self.exc_count,
            ("DENIED", "count"): self.denied,
            ("RD_BUSY", "ctx"): sum(1 << c for c, b in enumerate(self.rd_busy) if b),
        }
        value = 0
        for f in reg.fields:
            if f.access is Access.R:
                value |= hw[reg.name, f.name] << f.offset
            elif f.access.readable:
                value |= self.stored[reg.name][f.name] << f.offset
        return value

    # ------------------------------------------------------------------ packets
    def _inside(self, region, addr, length):
        base, limit = self.region(region)
        return addr >= base and addr + length <= limit

    def check_request(self, hdr, beats=1):
        """The :class:`Cause` of a request header (NONE: it passes)."""
        kind, length, aes = hdr["kind"], hdr["length"], hdr["aes"]
        aligned = self._aligned(hdr)
        if kind == Kind.READ_REQ:
            ok = aligned and length <= MAX_FRAME_BYTES and beats == 1
        elif kind == Kind.WRITE_REQ:
            ok = aligned and length <= MAX_PAYLOAD_BYTES
        else:
            ok = False
        if not ok:
            return Cause.MALFORMED
        phys = self.kxbctxmap(hdr["xbctx"])
        if aes:
            if phys >= self.contexts or not 1 <= self.kphysmap(phys) < REGIONS:
                return Cause.MAP
            if kind == Kind.WRITE_REQ and hdr["cc"] and length == self.beat_bytes and \
                    not self.wopen[phys]:
                return Cause.MALFORMED
            if not self._inside(self.kphysmap(phys), hdr["addr"], length):
                return Cause.REGION
        elif not self._inside(0, hdr["addr"], length):
            return Cause.CLEAR
        return Cause.NONE

    def _aligned(self, hdr):
        # length 1..n beats and address on a beat boundary
        bb = self.beat_bytes
        return hdr["length"] % bb == 0 and hdr["length"] != 0 and hdr["addr"] % bb == 0

    def framing(self, hdr, data):
        """What a payload packet emits: ``(beats, k)`` where *beats* is ``hdr.length /
        (16·lanes)`` pairs ``(beat, zero)`` and *k* the index of the beat at which a framing
        error shows (``None`` if the beat count matches the length)."""
        n = hdr["length"] // self.beat_bytes
        if len(data) == n:
            return [(d, False) for d in data], None
        k = min(len(data), n) - 1
        return [(d, False) for d in data[:k]] + [(0, True)] * (n - k), k

    def _abandon(self, hdr, ctx, is_open, decrypt):
        """The framing-error beat of an aes packet: abandon a frame open in this direction
        (IV with block 0 errs on an active context and idles it; on an idle one it errs and
        changes nothing), raise MALFORMED."""
        if is_open:
            (self.gcm_r if decrypt else self.gcm_w).step(0, ctx, Op.IV, decrypt)
        self._raise(Cause.MALFORMED, hdr)

    def waits_for_slot(self, hdr, beats=1):
        """The request would wait at the head of ``xb_i`` (it and every request behind it):
        an aes read that passes its check, to a context whose read is outstanding and whose
        holding slot is full. The SXP may already have accepted it into its pipeline; the
        caller keeps such a request (and the ones after it) and gives it to :meth:`request`
        once the context's ``cc`` completion has been given to :meth:`completion`."""
        hdr = header(**hdr)
        if hdr["kind"] != Kind.READ_REQ or not hdr["aes"] or \
                self.check_request(hdr, beats) is not Cause.NONE:
            return False
        phys = self.kxbctxmap(hdr["xbctx"])
        return self.rd_busy[phys] and self.slot[phys] is not None

    def request(self, hdr, data=(0,)):
        """A packet accepted on ``xb_i``: the packets it sends on ``pcie_o`` (a parked read
        sends nothing now; :meth:`completion` returns it when its context is released).
        A request for which :meth:`waits_for_slot` is true is a :class:`ModelError`."""
        hdr, data = header(**hdr), list(data)
        cause = self.check_request(hdr, len(data))
        if cause is not Cause.NONE:
            self._raise(cause, hdr)
            return []
        aes = hdr["aes"]
        phys = self.kxbctxmap(hdr["xbctx"])
        hdr["key_index"] = phys if aes else 0
        if hdr["kind"] == Kind.READ_REQ:
            out = Packet(hdr, [0])
            if not aes:
                return [out]
            if not self.rd_busy[phys] and self.slot[phys] is None:
                self.rd_busy[phys] = True
                return [out]
            if self.slot[phys] is None:
                self.slot[phys] = out
                return []
            raise ModelError(f"a read on context {phys} was accepted while its slot was full")
        beats, bad = self.framing(hdr, data)
        if not aes:
            if bad is not None:
                self._raise(Cause.MALFORMED, hdr)
            return [Packet(hdr, [0 if zero else d for d, zero in beats])]
        out = []
        for k, (block, zero) in enumerate(beats):
            last = k == len(beats) - 1
            if zero:
                if k == bad:
                    self._abandon(hdr, phys, self.wopen[phys], 0)
                self.wopen[phys] = False
                out.append(0)
                continue
            if k == 0 and not self.wopen[phys]:
                op = Op.IV
            elif last and hdr["cc"]:
                op = Op.MAC
            else:
                op = Op.DATA
            self.wopen[phys] = {Op.IV: True, Op.MAC: False}.get(op, self.wopen[phys])
            block, _, err = self.gcm_w.step(block, phys, op, 0)
            if err:
                self._raise(Cause.FRAME, hdr)
            out.append(block)
        return [Packet(hdr, out)]

    def completion(self, hdr, data):
        """A packet accepted on ``pcie_i``: ``(packets on xb_o, parked reads released onto
        pcie_o)``."""
        hdr, data = header(**hdr), list(data)
        ki, aes, cc, length = hdr["key_index"], hdr["aes"], hdr["cc"], hdr["length"]
        have = ki < self.contexts
        ropen = have and self.ropen[ki]
        malformed = (hdr["kind"] != Kind.READ_CPL or not self._aligned(hdr) or
                     length > MAX_PAYLOAD_BYTES or
                     (aes and cc and length == self.beat_bytes and not ropen))
        out = []
        if malformed:
            self._raise(Cause.MALFORMED, hdr)
        elif not aes:
            beats, bad = self.framing(hdr, data)
            if bad is not None:
                self._raise(Cause.MALFORMED, hdr)
            out = [Packet(hdr, [0 if zero else d for d, zero in beats])]
        else:
            beats, bad = self.framing(hdr, data)
            blocks = []
            for k, (block, zero) in enumerate(beats):
                last = k == len(beats) - 1
                if zero:
                    if k == bad:
                        self._abandon(hdr, ki, have and self.ropen[ki], 1)
                    if have:
                        self.ropen[ki] = False
                    blocks.append(0)
                    continue
                if k == 0 and not (have and self.ropen[ki]):
                    op = Op.IV
                elif last and cc:
                    op = Op.MAC
                else:
                    op = Op.DATA
                if have:
                    self.ropen[ki] = {Op.IV: True, Op.MAC: False}.get(op, self.ropen[ki])
                res, tag_ok, err = self.gcm_r.step(block, ki, op, 1)
                if op is Op.MAC and not tag_ok:
                    res = 0
                    if not err:
                        self._raise(Cause.AUTH, hdr)
                if err:
                    self._raise(Cause.FRAME, hdr)
                blocks.append(res)
            out = [Packet(hdr, blocks)]
        released = []
        if hdr["kind"] == Kind.READ_CPL and aes and cc and have:
            self.rd_busy[ki] = False
            if self.slot[ki] is not None:
                released.append(self.slot[ki])
                self.slot[ki] = None
                self.rd_busy[ki] = True
        return out, released

    # ------------------------------------------------------------------ helpers
    def xb_contexts_of(self, phys):
        """Exchange-block contexts that map to physical context *phys*."""
        return [i for i in range(XBCTX_ENTRIES) if self.kxbctxmap(i) == phys]
