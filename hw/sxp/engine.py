"""``EnginePath``: one direction's engine — a :class:`~hw.gcm.GcmCore` with the packet
information of its beats carried beside it.

::

    i (ops) ─ SkidBuffer ─┬─ gcm_core.i   gcm_core.o ─┬─ o (beats)
                          └─ meta FIFO ───────────────┘   └─ event (FRAME / AUTH)

Every beat of the direction goes through the engine in order: aes beats as IV/DATA/MAC,
clear beats, read requests and pad beats as NOP (passed through unchanged), so the
direction's packets leave in arrival order without a second path. The meta FIFO holds
header, ``first``/``last`` and the zero flag of each beat inside the engine (it is deeper
than the engine's latency, so it never throttles). Back-pressure on ``o`` stalls the
engine (its global stall) and, through the skid buffer, this direction only.

Output beat: the engine's block, or zero for a framing-error beat and for the tag-slot beat
of a read frame whose tag did not verify (the tile's signal to discard the frame). Events:
FRAME when the engine answered ``err`` to a beat that was not a framing-error beat, AUTH
when a decrypted frame's tag did not match.
"""
from amaranth.hdl import Module, Mux
from amaranth.lib import stream, wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out

from hw.common import SkidBuffer, wire
from hw.gcm import GcmCore
from hw.gcm.layout import Op, key_layout

from .ingress import event_layout, meta_layout, op_layout
from .packet import beat_layout
from .regs import Cause

__all__ = ["EnginePath"]


class EnginePath(wiring.Component):
    """*decrypt*: this direction's engine decrypts (read completions) or encrypts (writes)."""

    def __init__(self, *, decrypt, contexts, lanes, karatsuba=None):
        self.decrypt = bool(decrypt)
        kwargs = {} if karatsuba is None else {"karatsuba": karatsuba}
        self.gcm = GcmCore(contexts, lanes=lanes, **kwargs)
        super().__init__({
            "i": In(stream.Signature(op_layout(lanes))),
            "key": In(stream.Signature(key_layout(contexts))),
            "o": Out(stream.Signature(beat_layout(lanes))),
            "event": Out(event_layout),
        })
        self.latency = 1 + self.gcm.latency     # skid buffer + engine

    def elaborate(self, platform):
        m = Module()
        m.submodules.gcm = gcm = self.gcm
        m.submodules.skid = skid = SkidBuffer(self.i.payload.shape())
        m.submodules.meta = meta = SyncFIFO(width=meta_layout.size, depth=gcm.latency + 2)
        wiring.connect(m, wiring.flipped(self.i), skid.i)
        wiring.connect(m, wiring.flipped(self.key), gcm.key)

        op = skid.o.payload
        m.d.comb += [
            gcm.i.valid.eq(skid.o.valid & meta.w_rdy),
            skid.o.ready.eq(gcm.i.ready & meta.w_rdy),
            gcm.i.payload.block.eq(op.data),
            gcm.i.payload.ctx.eq(op.ctx),
            gcm.i.payload.op.eq(op.op),
            gcm.i.payload.decrypt.eq(self.decrypt),
            meta.w_en.eq(gcm.i.valid & gcm.i.ready),
            meta.w_data.eq(op.meta),
        ]

        mh = meta_layout(meta.r_data)
        go = gcm.o.payload
        out = wire(m, gcm.o.valid & self.o.ready, "out")
        fail = wire(m, (go.op == Op.MAC) & ~go.tag_ok & self.decrypt, "tag_fail")
        m.d.comb += [
            meta.r_en.eq(out),
            gcm.o.ready.eq(self.o.ready),
            self.o.valid.eq(gcm.o.valid),
            self.o.payload.data.eq(Mux(fail | mh.zero, 0, go.block)),
            self.o.payload.hdr.eq(mh.hdr),
            self.o.payload.first.eq(mh.first),
            self.o.payload.last.eq(mh.last),
        ]
        # a zero beat's err is expected (it abandons the frame on purpose)
        with m.If(out & ~mh.zero & (go.err | fail)):
            m.d.comb += [self.event.valid.eq(1),
                         self.event.cause.eq(Mux(go.err, Cause.FRAME, Cause.AUTH)),
                         self.event.tile.eq(mh.hdr.tile), self.event.addr.eq(mh.hdr.addr),
                         self.event.kind.eq(mh.hdr.kind)]
        return m
