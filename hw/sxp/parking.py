"""``ReadParking``: one aes read per physical context outstanding (write direction only).

An aes read request (an op with ``meta.read``) marks its physical context busy when it
passes; the context is released by ``release`` (the completion ingress saw the read's ``cc``
completion end). A read to a busy context moves into that context's holding slot and the
stream keeps flowing (reads and writes of other contexts pass it); only a further read to a
context whose slot is full stalls the stream. A parked read leaves as soon as its context
is released, between packets (lowest context first), ahead of the next input packet.
"""
from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from hw.common import lowest_set, wire
from hw.gcm.layout import Op

from .ingress import op_layout, release_layout
from .packet import Header

__all__ = ["ReadParking"]


class ReadParking(wiring.Component):
    """The read gate between the request ingress and the write engine.

    Ports: ``i`` / ``o`` op streams (:func:`~hw.sxp.ingress.op_layout`), ``release`` (from
    the completion ingress), ``busy`` (bit c: a read on context c awaits its ``cc``
    completion; the RD_BUSY register).
    """

    def __init__(self, *, contexts, lanes):
        self.contexts = contexts
        super().__init__({
            "i": In(stream.Signature(op_layout(lanes))),
            "o": Out(stream.Signature(op_layout(lanes))),
            "release": In(release_layout),
            "busy": Out(contexts),
        })

    def elaborate(self, platform):
        m = Module()
        n = self.contexts
        busy = self.busy
        slot_v = Signal(n, name="slot_valid")
        slot_h = [Signal(Header, name=f"slot{c}_hdr") for c in range(n)]
        in_pkt = Signal()               # the output is inside a packet

        # a parked read whose context is free leaves first, between packets
        rel_any, rel_ctx = lowest_set(m, slot_v & ~busy, "slot_release")
        inject = wire(m, rel_any & ~in_pkt, "inject")

        ip = self.i.payload
        read = ip.meta.read
        ctx = ip.meta.hdr.key_index
        busy_c = busy.bit_select(ctx, 1)
        slot_c = slot_v.bit_select(ctx, 1)
        pass_read = wire(m, read & ~busy_c & ~slot_c, "pass_read")
        park = wire(m, read & busy_c & ~slot_c, "park")
        forward = ~read | pass_read

        # (built field by field under If/Else: a signal driven partly by constants and partly
        # by a Switch lost its constant bits in the generated Verilog)
        slot_hdr = Signal(Header, name="slot_hdr")
        with m.Switch(rel_ctx):
            for c in range(n):
                with m.Case(c):
                    m.d.comb += slot_hdr.eq(slot_h[c])
        op = self.o.payload
        with m.If(inject):      # the parked read: a one-beat NOP packet
            m.d.comb += [op.op.eq(Op.NOP), op.meta.hdr.eq(slot_hdr), op.meta.first.eq(1),
                         op.meta.last.eq(1), op.meta.read.eq(1)]
        with m.Else():
            m.d.comb += op.eq(ip)
        m.d.comb += [
            self.o.valid.eq(inject | (self.i.valid & forward)),
            self.i.ready.eq(~inject & Mux(forward, self.o.ready, park)),
        ]
        o_fire = self.o.valid & self.o.ready
        i_fire = self.i.valid & self.i.ready
        with m.If(o_fire):
            m.d.sync += in_pkt.eq(~self.o.payload.meta.last)
        for c in range(n):
            with m.If((i_fire & pass_read & (ctx == c)) | (inject & self.o.ready & (rel_ctx == c))):
                m.d.sync += busy[c].eq(1)
            with m.Elif(self.release.valid & (self.release.ctx == c)):
                m.d.sync += busy[c].eq(0)
            with m.If(i_fire & park & (ctx == c)):
                m.d.sync += [slot_v[c].eq(1), slot_h[c].eq(ip.meta.hdr)]
            with m.Elif(inject & self.o.ready & (rel_ctx == c)):
                m.d.sync += slot_v[c].eq(0)
        return m
