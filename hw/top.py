"""``SxpSystem``: the SXP path assembled (issue 6; Verilog module ``sxp_system``).

::

    tiles ── xb_i ──▶ ┌─────┐ ── pcie_o ─┬─ READ_REQ ─▶ pcie_rdtable.req_i ─ req_o ─┐
                      │ SXP │            └─ WRITE_REQ ─────────────────────────────┴─ mux ─▶ pcie_o ── host
    tiles ◀── xb_o ── └─────┘ ◀── pcie_i ── pcie_rdtable.cpl_o ◀── cpl_i ◀──────────────────── pcie_i ── host

Exchange side (tiles): ``xb_i`` requests in, ``xb_o`` decrypted completions out. Host side:
``pcie_o`` requests out (write requests from the SXP and read requests with the PCIe tag
the read table allocated, one packet at a time), ``pcie_i`` completions in (untrusted:
the read table checks them and writes tile, ``key_index``, ``aes`` and ``cc`` before the
SXP sees them). The SXP's ``host`` and ``ccu`` CSR ports and ``irq`` are brought out, and
so are the read table's ``timeout`` input and status outputs (``rd_``-prefixed). At
``lanes`` = L every stream carries beats of 128·L bits (docs/line-rate.md).

The request merge keeps packets whole: once a write packet's first beat has gone, its
later beats follow before any read request; between packets the two sources alternate
when both wait. Nothing is registered on the merge (latency 0; ``valid`` never depends on
``ready``).
"""
from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from hw import csr
from hw.pcie import PcieReadTable
from hw.pcie.layout import COUNTER_BITS, TAG_BITS, TIMEOUT_BITS
from hw.pcie.layout import Cause as RdCause
from hw.sxp import SXP
from hw.sxp.packet import Kind, beat_layout

__all__ = ["SxpSystem"]


class SxpSystem(wiring.Component):
    """SXP + PCIe read lookup table.

    Parameters
    ----------
    contexts : int
        Physical key contexts of the SXP (1..16); default 16.
    entries : int
        Read-table entries (outstanding PCIe reads, 2..256); default 32 — the SXP has at
        most one aes read per context outstanding, so 2 × contexts leaves room for
        cleartext reads while keeping the table (and the Verilator build) small.
    rcb, max_payload, max_read, lanes :
        As :class:`hw.pcie.PcieReadTable`; *lanes* (1, 2, 4) sets the beat width of every
        stream (128 × lanes bits) for the SXP and the read table alike.
    """

    def __init__(self, contexts=16, entries=32, rcb=64, max_payload=256, max_read=1024, lanes=1):
        params = dict(contexts=contexts, entries=entries, rcb=rcb, max_payload=max_payload,
                      max_read=max_read, lanes=lanes)
        for name, value in params.items():
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"{name} must be an int, not {value!r}")
        # the blocks check the ranges (ValueError)
        self.sxp = SXP(contexts=contexts, lanes=lanes)
        self.rdtable = PcieReadTable(entries=entries, rcb=rcb, max_payload=max_payload,
                                     max_read=max_read, lanes=lanes)
        self.contexts, self.lanes = contexts, lanes
        beat = beat_layout(lanes)
        bus = csr.Signature(self.sxp.regmap.addr_width, self.sxp.regmap.data_width)
        super().__init__({
            "xb_i": In(stream.Signature(beat)),
            "xb_o": Out(stream.Signature(beat)),
            "pcie_o": Out(stream.Signature(beat)),
            "pcie_i": In(stream.Signature(beat)),
            "host": In(bus),
            "ccu": In(bus),
            "irq": Out(1),
            "rd_timeout": In(TIMEOUT_BITS),
            "rd_err_count": Out(COUNTER_BITS),
            "rd_err_tag": Out(TAG_BITS),
            "rd_err_cause": Out(RdCause),
            "rd_timeout_count": Out(COUNTER_BITS),
            "rd_timeout_tag": Out(TAG_BITS),
            "rd_outstanding": Out(range(entries + 1)),
        })
        self.regmap = self.sxp.regmap

    def elaborate(self, platform):
        m = Module()
        m.submodules.sxp = sxp = self.sxp
        m.submodules.rdtable = rdt = self.rdtable

        # exchange side and CSR ports straight to the SXP
        wiring.connect(m, wiring.flipped(self.xb_i), sxp.xb_i)
        wiring.connect(m, sxp.xb_o, wiring.flipped(self.xb_o))
        wiring.connect(m, wiring.flipped(self.host), sxp.host)
        wiring.connect(m, wiring.flipped(self.ccu), sxp.ccu)
        m.d.comb += self.irq.eq(sxp.irq)

        # completions: host → read table → SXP
        wiring.connect(m, wiring.flipped(self.pcie_i), rdt.cpl_i)
        wiring.connect(m, rdt.cpl_o, sxp.pcie_i)
        m.d.comb += [
            rdt.timeout.eq(self.rd_timeout),
            self.rd_err_count.eq(rdt.err_count),
            self.rd_err_tag.eq(rdt.err_tag),
            self.rd_err_cause.eq(rdt.err_cause),
            self.rd_timeout_count.eq(rdt.timeout_count),
            self.rd_timeout_tag.eq(rdt.timeout_tag),
            self.rd_outstanding.eq(rdt.outstanding),
        ]

        # requests: split by kind (the header is on every beat and constant in a packet)
        out = sxp.pcie_o
        is_read = Signal()
        m.d.comb += [
            is_read.eq(out.payload.hdr.kind == Kind.READ_REQ),
            rdt.req_i.payload.eq(out.payload),
            rdt.req_i.valid.eq(out.valid & is_read),
        ]
        w_valid = Signal()
        w_ready = Signal()
        m.d.comb += [w_valid.eq(out.valid & ~is_read),
                     out.ready.eq(Mux(is_read, rdt.req_i.ready, w_ready))]

        # merge read requests (one beat each) and write packets onto pcie_o, packets whole
        in_write = Signal()      # a write packet has begun and not ended
        prefer_w = Signal()      # between packets, alternate when both wait
        sel_w = Signal()
        m.d.comb += sel_w.eq(in_write | (w_valid & (~rdt.req_o.valid | prefer_w)))
        m.d.comb += [
            self.pcie_o.valid.eq(Mux(sel_w, w_valid, rdt.req_o.valid)),
            self.pcie_o.payload.eq(Mux(sel_w, out.payload, rdt.req_o.payload)),
            w_ready.eq(sel_w & self.pcie_o.ready),
            rdt.req_o.ready.eq(~sel_w & self.pcie_o.ready),
        ]
        with m.If(self.pcie_o.valid & self.pcie_o.ready):
            with m.If(sel_w):
                m.d.sync += in_write.eq(~out.payload.last)
                with m.If(out.payload.last):
                    m.d.sync += prefer_w.eq(0)
            with m.Else():
                m.d.sync += prefer_w.eq(1)
        return m
