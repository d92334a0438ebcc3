"""``Ingress``: one direction's front end of the SXP (instantiated once per direction).

::

    port ─ SkidBuffer ─ check stages ─ framer ─▶ o (engine ops, in packet order)
                         (registered)    │
                                         └─▶ event (exception cause + header)

- **Skid buffer**: the input port's ``ready`` is a register, so no path runs from the
  SXP's outputs back to its inputs.
- **Check stages** (three for requests, one for completions), computed for every beat and
  used on the first beat of a packet, each a register stage under one stall:
  requests: C1 ``phys = KXBCTXMAP[xbctx]``, ``end = addr + length`` (log-depth adder) and the
  header-only checks (kind, length, alignment to the beat); C2 ``region =
  KPHYSMAP[phys]``, the region's base and limit; C3 the two compares. Completions: C1 the
  header-only checks. Nothing about a packet leaves before its first beat's checks are
  done, and no compare sits in the same cycle as the framing decision.
- **Framer**: on the first beat the verdict (:class:`~hw.sxp.regs.Cause`), physical
  context and header (``key_index`` set) are latched for the later beats, which cannot steer
  the packet. A dropped packet is consumed up to its ``last`` beat. A passed one leaves with
  exactly ``hdr.length`` / beat bytes beats (docs/sxp.md "Malformed framing": zero beats
  from the one where the count turns out wrong; extra input beats consumed unseen). Per
  physical context one bit says a frame is open in this direction; the first beat on a
  context with none is op IV, the last beat of a ``cc`` packet op MAC, others DATA. Clear
  beats, read requests and pad beats are op NOP (the engine passes them through in order).

Completions: the ingress also reports the end of a read (``release``: an aes READ_CPL with
``cc`` whose last beat was accepted, dropped or not), one cycle later.
"""
from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, enum, stream, wiring
from amaranth.lib.wiring import In, Out

from hw.common import SkidBuffer, add, at_least, at_most, wire
from hw.gcm.layout import BLOCK_BITS, CTX_BITS, Op

from .packet import BEAT_BYTES, MAX_FRAME_BYTES, MAX_PAYLOAD_BYTES, TILE_BITS, Header, Kind, beat_layout
from .regs import REGION_BITS, REGIONS, XBCTX_ENTRIES, Cause

__all__ = ["Ingress", "op_layout", "meta_layout", "event_layout", "release_layout"]

meta_layout = data.StructLayout({
    "hdr": Header,      # the packet's checked header (key_index set)
    "first": 1,
    "last": 1,
    "zero": 1,          # a framing-error beat: leaves as zero, its engine err is expected
    "read": 1,          # an aes read request (the read-parking stage decides when it leaves)
})


def op_layout(lanes):
    """An op for a direction's engine, with what the output needs of its beat."""
    return data.StructLayout({"data": BLOCK_BITS * lanes, "ctx": CTX_BITS, "op": Op,
                              "meta": meta_layout})


event_layout = data.StructLayout({
    "valid": 1, "cause": Cause, "tile": TILE_BITS, "addr": 32, "kind": 2,
})

release_layout = data.StructLayout({"valid": 1, "ctx": CTX_BITS})


class _Mode(enum.Enum, shape=2):
    DROP = 0    # failed its check: consumed, nothing leaves
    GCM = 1     # aes payload: through the engine
    PASS = 2    # clear: through the engine as NOP
    READ = 3    # aes read request: to the read-parking stage


def _set_event(m, event, cause, hdr):
    m.d.comb += [event.valid.eq(1), event.cause.eq(cause), event.tile.eq(hdr.tile),
                 event.addr.eq(hdr.addr), event.kind.eq(hdr.kind)]


class Ingress(wiring.Component):
    """One direction's front end.

    Parameters
    ----------
    requests : bool
        ``True``: the ``xb_i`` side (write and read requests, region checks against the
        configuration ports); ``False``: the ``pcie_i`` side (read completions).
    contexts, lanes : int
        Physical key contexts (1..16) and 128-bit lanes per beat (1, 2, 4).
    """

    def __init__(self, *, requests, contexts, lanes, _formal_mutant=None):
        # test-only seeded bugs for formal/sxp.py (never set in a design): "drop_carry" (the
        # request's end = addr + length kept mod 2**32: a request wrapping past 2**32 passes),
        # "limit_lt" (end < limit instead of end <= limit: the region's last bytes refused),
        # "data_early" (a beat leaves with the data of the beat behind it in the skid buffer),
        # "read_multi_beat" (a read request of more than one beat is not MALFORMED),
        # "end_by_last" (a packet ends at the sender's `last`, not after length / beat bytes)
        # "no_framing_error" / "no_framing_event" (a mis-framed write is not zeroed / raises no event)
        if _formal_mutant not in (None, "drop_carry", "limit_lt", "data_early", "read_multi_beat", "end_by_last",
                                  "no_framing_error", "no_framing_event"):
            raise ValueError(f"unknown _formal_mutant {_formal_mutant!r}")
        self._formal_mutant = _formal_mutant
        self.requests, self.contexts, self.lanes = bool(requests), contexts, lanes
        self.beat_bytes = BEAT_BYTES * lanes
        ports = {
            "i": In(stream.Signature(beat_layout(lanes))),
            "o": Out(stream.Signature(op_layout(lanes))),
            "event": Out(event_layout),
            "open": Out(contexts),          # frames open in this direction (for tests/waves)
        }
        if self.requests:
            ports.update({
                "kxbctxmap": In(data.ArrayLayout(CTX_BITS, XBCTX_ENTRIES)),
                "kphysmap": In(data.ArrayLayout(REGION_BITS, contexts)),
                "base": In(data.ArrayLayout(32, REGIONS)),
                "limit": In(data.ArrayLayout(32, REGIONS)),
            })
        else:
            ports["release"] = Out(release_layout)
        super().__init__(ports)

    def _hook(self, mutant, bug, value):
        """*bug* when the test-only seeded bug *mutant* is on, else *value* (unchanged)."""
        return bug if self._formal_mutant == mutant else value

    # ---- check stages ------------------------------------------------------------------------
    def check_layouts(self):
        """The layouts of the check stage registers C1, C2, C3 (``s1``, ``s2``, ``s3``; C2 and
        C3 exist on the request side only)."""
        beat = beat_layout(self.lanes)
        c1 = data.StructLayout({"beat": beat, "malformed": 1, "phys": CTX_BITS, "end": 33})
        c2 = data.StructLayout({"beat": beat, "malformed": 1, "phys": CTX_BITS, "end": 33,
                                "map_bad": 1, "base": 32, "limit": 32})
        c3 = data.StructLayout({"beat": beat, "malformed": 1, "phys": CTX_BITS, "map_bad": 1,
                                "outside": 1})
        return c1, c2, c3

    def _header_checks(self, hdr, last):
        """Bad kind, length or alignment: MALFORMED whatever else holds."""
        shift = self.beat_bytes.bit_length() - 1
        len_ok = (hdr.length[:shift] == 0) & (hdr.length != 0) & (hdr.addr[:shift] == 0)
        if self.requests:
            is_rd = hdr.kind == Kind.READ_REQ
            one_beat = 1 if self._formal_mutant == "read_multi_beat" else last
            return ~Mux(is_rd, len_ok & (hdr.length <= MAX_FRAME_BYTES) & one_beat,
                        len_ok & (hdr.length <= MAX_PAYLOAD_BYTES) & (hdr.kind == Kind.WRITE_REQ))
        return ~(len_ok & (hdr.length <= MAX_PAYLOAD_BYTES) & (hdr.kind == Kind.READ_CPL))

    def _checks(self, m, beat_in, advance):
        """The check stages; returns (valid, beat, results) of the last one."""
        n = self.contexts
        c1, c2, c3 = self.check_layouts()
        s1_valid, s1 = Signal(name="s1_valid"), Signal(c1, name="s1", reset_less=True)
        hdr = beat_in.payload.hdr
        # (nets built by helpers go outside `m.If`: comb statements there would be gated)
        # end = addr + length in 33 bits: the carry is part of the compare with the limit
        end_bits = 32 if self._formal_mutant == "drop_carry" else 33
        end = add(m, hdr.addr, hdr.length, end_bits, "c1_end") if self.requests else None
        with m.If(advance):
            m.d.sync += [s1_valid.eq(beat_in.valid), s1.beat.eq(beat_in.payload),
                         s1.malformed.eq(self._header_checks(hdr, beat_in.payload.last))]
            if self.requests:
                m.d.sync += [s1.phys.eq(self.kxbctxmap[hdr.xbctx]), s1.end.eq(end)]
            else:
                m.d.sync += s1.phys.eq(hdr.key_index)
        if not self.requests:
            return s1_valid, s1, {"malformed": s1.malformed, "phys": s1.phys}

        # C2: the region of the packet and its bounds
        s2_valid, s2 = Signal(name="s2_valid"), Signal(c2, name="s2", reset_less=True)
        phys_ok = (s1.phys < n) if n < (1 << CTX_BITS) else Const(1)
        region = wire(m, self.kphysmap[s1.phys[:max(1, (n - 1).bit_length())]], "c2_region")
        map_ok = phys_ok & (region != 0) & (region <= REGIONS - 1)
        sel = wire(m, Mux(s1.beat.hdr.aes, region, 0), "c2_sel")
        with m.If(advance):
            m.d.sync += [s2_valid.eq(s1_valid), s2.beat.eq(s1.beat), s2.malformed.eq(s1.malformed),
                         s2.phys.eq(s1.phys), s2.end.eq(s1.end), s2.map_bad.eq(~map_ok),
                         s2.base.eq(self.base[sel]), s2.limit.eq(self.limit[sel])]

        # C3: inside [base, limit) with 33-bit end arithmetic
        s3_valid, s3 = Signal(name="s3_valid"), Signal(c3, name="s3", reset_less=True)
        if self._formal_mutant == "limit_lt":
            below_limit = ~at_least(m, s2.end, Cat(s2.limit, Const(0, 1)), "c3_le")
        else:
            below_limit = at_most(m, s2.end, Cat(s2.limit, Const(0, 1)), "c3_le")
        inside = at_least(m, s2.beat.hdr.addr, s2.base, "c3_ge") & below_limit
        with m.If(advance):
            m.d.sync += [s3_valid.eq(s2_valid), s3.beat.eq(s2.beat), s3.malformed.eq(s2.malformed),
                         s3.phys.eq(s2.phys), s3.map_bad.eq(s2.map_bad), s3.outside.eq(~inside)]
        return s3_valid, s3, {"malformed": s3.malformed, "phys": s3.phys,
                              "map_bad": s3.map_bad, "outside": s3.outside}

    # ---- framer ------------------------------------------------------------------------------
    def elaborate(self, platform):
        m = Module()
        n, lanes = self.contexts, self.lanes
        shift = self.beat_bytes.bit_length() - 1

        m.submodules.skid = skid = SkidBuffer(beat_layout(lanes))
        wiring.connect(m, wiring.flipped(self.i), skid.i)
        f_ready = Signal()              # the framer takes the checked beat
        c_valid = Signal()
        advance = wire(m, ~c_valid | f_ready, "advance")
        m.d.comb += skid.o.ready.eq(advance)
        valid, c, res = self._checks(m, skid.o, advance)
        m.d.comb += c_valid.eq(valid)

        beat, hin = c.beat, c.beat.hdr
        mid = Signal()                      # inside a packet: the next beat is not its first
        pad, disc = Signal(name="pad"), Signal(name="disc")      # emitting pad beats / discarding surplus beats
        idx = Signal(range(MAX_PAYLOAD_BYTES // self.beat_bytes))
        opened = Signal(n, name="frame_open")
        m.d.comb += self.open.eq(opened)
        first = wire(m, ~mid & ~pad, "first")

        phys_c = res["phys"]
        open_new = opened.bit_select(phys_c, 1)
        one_beat_cc = hin.aes & hin.cc & (hin.length == self.beat_bytes) & ~open_new
        cause_c = Signal(Cause, name="cause_c")
        hdr_c = Signal(Header, name="hdr_c")
        mode_c = Signal(_Mode, name="mode_c")
        m.d.comb += hdr_c.eq(hin)
        if self.requests:
            is_rd = hin.kind == Kind.READ_REQ
            with m.If(res["malformed"]):
                m.d.comb += cause_c.eq(Cause.MALFORMED)
            with m.Elif(hin.aes & res["map_bad"]):
                m.d.comb += cause_c.eq(Cause.MAP)
            with m.Elif(~is_rd & one_beat_cc):
                m.d.comb += cause_c.eq(Cause.MALFORMED)
            with m.Elif(res["outside"]):
                m.d.comb += cause_c.eq(Mux(hin.aes, Cause.REGION, Cause.CLEAR))
            m.d.comb += [hdr_c.key_index.eq(Mux(hin.aes, phys_c, 0)),
                         mode_c.eq(Mux(cause_c != Cause.NONE, _Mode.DROP,
                                       Mux(hin.aes, Mux(is_rd, _Mode.READ, _Mode.GCM), _Mode.PASS)))]
        else:
            with m.If(res["malformed"] | one_beat_cc):
                m.d.comb += cause_c.eq(Cause.MALFORMED)
            m.d.comb += mode_c.eq(Mux(cause_c != Cause.NONE, _Mode.DROP,
                                      Mux(hin.aes, _Mode.GCM, _Mode.PASS)))

        mode_q, phys_q = Signal(_Mode, name="mode_q"), Signal(CTX_BITS, name="phys_q")
        hdr_q = Signal(Header, name="hdr_q")
        mode = Signal(_Mode, name="mode")
        phys = wire(m, Mux(first, phys_c, phys_q), "phys", CTX_BITS)
        hdr = Signal(Header, name="hdr")
        m.d.comb += [mode.eq(Mux(first, mode_c, mode_q)), hdr.eq(Mux(first, hdr_c, hdr_q))]

        # payload packets are beat-counted; a read request is one beat by its check
        live = wire(m, ((mode == _Mode.GCM) | (mode == _Mode.PASS)) & (hdr.kind != Kind.READ_REQ),
                    "live")
        end = wire(m, self._hook("end_by_last", beat.last, (idx + 1) == (hdr.length >> shift)), "end")
        bad = wire(m, self._hook("no_framing_error", Const(0, 1), live & ~pad & ~disc & (beat.last != end)), "bad")
        zero = wire(m, pad | bad, "zero")
        beat_v = Mux(pad, 1, c_valid & ~disc)
        open_c = opened.bit_select(phys, 1)
        with m.If(mode == _Mode.GCM):
            # a zero beat errs and changes nothing (NOP), except the first one of a frame open
            # in this direction: IV with block 0 on an active context abandons the frame
            m.d.comb += self.o.payload.op.eq(
                Mux(zero, Mux(~pad & open_c, Op.IV, Op.NOP),
                    Mux(first & ~open_c, Op.IV, Mux(end & hdr.cc, Op.MAC, Op.DATA))))
        with m.Else():
            m.d.comb += self.o.payload.op.eq(Op.NOP)
        emits = (mode == _Mode.GCM) | (mode == _Mode.PASS) | (mode == _Mode.READ)
        meta = self.o.payload.meta
        m.d.comb += [
            self.o.valid.eq(beat_v & emits & ~disc),
            self.o.payload.data.eq(Mux(zero | (mode == _Mode.READ), 0,
                                       self._hook("data_early", skid.o.payload.data, beat.data))),
            self.o.payload.ctx.eq(Mux(mode == _Mode.GCM, phys, 0)),
            meta.hdr.eq(hdr), meta.first.eq(first), meta.last.eq(~live | end),
            meta.zero.eq(zero), meta.read.eq(mode == _Mode.READ),
        ]
        fire = wire(m, self.o.valid & self.o.ready, "fire")

        # input handshake: surplus beats and dropped packets are consumed; pad beats hold it
        m.d.comb += f_ready.eq(disc | (~pad & Mux(mode == _Mode.DROP, 1, self.o.ready)))
        take = wire(m, c_valid & f_ready, "take")
        with m.If(take):
            m.d.sync += mid.eq(~beat.last)
            with m.If(first):
                m.d.sync += [mode_q.eq(mode_c), phys_q.eq(phys_c), hdr_q.eq(hdr_c)]
            with m.If(disc & beat.last):
                m.d.sync += disc.eq(0)
        step = wire(m, (take & live & ~disc) | (fire & pad), "step")
        with m.If(step):
            with m.If(end):
                m.d.sync += [idx.eq(0), pad.eq(0), disc.eq(~pad & ~beat.last)]
            with m.Else():
                m.d.sync += [idx.eq(idx + 1), pad.eq(pad | beat.last)]

        # frames open in this direction
        op = self.o.payload.op
        for k in range(n):
            with m.If(fire & (mode == _Mode.GCM) & (phys == k)):
                with m.If(zero):                # a framing error ends the frame
                    m.d.sync += opened[k].eq(0)
                with m.Elif(op == Op.IV):
                    m.d.sync += opened[k].eq(1)
                with m.Elif(op == Op.MAC):
                    m.d.sync += opened[k].eq(0)

        # exception events (the recorder registers them)
        with m.If(take & first & (cause_c != Cause.NONE)):
            _set_event(m, self.event, cause_c, hin)
        with m.Elif(self._hook("no_framing_event", Const(0, 1), take & bad)):     # framing: once per packet
            _set_event(m, self.event, Cause.MALFORMED, hdr)

        if not self.requests:
            # the read is over when its cc completion's last beat is accepted
            done = take & beat.last & (hdr.kind == Kind.READ_CPL) & hdr.aes & hdr.cc
            m.d.sync += [self.release.valid.eq(done), self.release.ctx.eq(hdr.key_index)]
        return m
