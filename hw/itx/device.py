"""``ItxDevice`` (design ``itx_device``): the SXP path of an ITX chip with what surrounds it —
tile memory, the ICU's reset scrub and the CCU's exception pin (docs/itx.md § itx_device).

::

    tiles ── xb_i ─(hold, link)─▶ ┌────────────┐ ─ pcie_o ─(link)─▶ host
                                  │ sxp_system │
    tiles ◀── xb_o ─┬──────────── └────────────┘ ◀ pcie_i ─(link)── host
                    └─▶ TileMemory ◀── ICU scrub (after every reset) ; tile_rd_* (tile side)
    CCU ── ccu (SXP registers) ; icu (ICU registers: events, cause records, HOLD) ; exc (pin)

- **Tile memory.** A receive buffer of ``words`` beats per tile for tiles 0 .. ``tiles`` − 1:
  every beat of a read completion leaving the SXP on ``xb_o`` for such a tile is written
  at the tile's next word (a ring; the pointer resets with the chip). ``xb_o`` still leaves
  the device (the exchange towards tiles that are modelled outside). The tile side reads
  a word back through ``tile_rd_addr`` (tile · ``words`` + word) → ``tile_rd_data`` one
  cycle later.
- **ICU reset scrub.** After every reset the ICU writes zero into every tile-memory word,
  one per cycle, for :attr:`scrub_cycles` cycles; the SXP clears its own key registers in
  the reset cycle and flushes its engines meanwhile (``scrub_cycles`` is at least the
  engines' flush). Until the walk is over the host link is down: ``link_ready`` is low,
  the ``host`` CSR port ignores writes and reads zero, ``pcie_i`` is not ready,
  ``pcie_o`` is not valid, and ``xb_i`` (the tiles) is not ready either.
- **Exception pin** ``exc``: the SXP's ``irq`` (its latched exception; the cause record is
  in its own registers on ``ccu``) OR the ICU's sticky events, set when the PCIe read table
  drops a bad completion (``RD_EVENTS.bad_cpl``, cause record ``RD_ERR``) or times a read
  out (``RD_EVENTS.timeout``, ``RD_TIMEOUT``). The CCU acknowledges an event by writing 1
  to its bit (and the SXP's by writing STATUS.exc = 1 on ``ccu``); the pin falls when
  nothing is left.
- **Hold**: writing ``HOLD.hold`` = 1 on ``icu`` raises the ``hold`` output (the tiles stop)
  and closes ``xb_i`` until the next reset: the CCU's reaction to an exception.

The ``icu`` port is the CCU's alone (the host has no path to it). Parameters: those of
:class:`hw.top.SxpSystem`, and *tiles* (1..16), *words* (a power of two, 16..4096).
"""
from amaranth.hdl import Const, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from hw import csr
from hw.common import check_int
from hw.pcie.layout import COUNTER_BITS, TAG_BITS, TIMEOUT_BITS
from hw.pcie.layout import Cause as RdCause
from hw.sxp.packet import Kind, beat_layout
from hw.top import SxpSystem

from .regs import icu_register_map

__all__ = ["ItxDevice", "TileMemory"]


class TileMemory(wiring.Component):
    """Per-tile receive rings of *words* beats (``lanes`` · 128 bits) for *tiles* tiles,
    written by the completion beats in ``xb`` (a stream watched, not driven: ``xb.ready`` is
    an input here) and cleared word by word while ``scrub`` is high (``scrub_addr`` walks
    the words). One read port (``rd_addr`` → ``rd_data`` one cycle later)."""

    def __init__(self, tiles, words, lanes):
        self.tiles, self.words, self.lanes = tiles, words, lanes
        self.depth = tiles * words
        beat = beat_layout(lanes)
        super().__init__({
            "xb_valid": In(1), "xb_ready": In(1), "xb_payload": In(beat),
            "scrub": In(1), "scrub_addr": In(range(self.depth)),
            "rd_addr": In(range(self.depth)), "rd_data": Out(128 * lanes),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.mem = mem = Memory(shape=128 * self.lanes, depth=self.depth, init=[])
        wp, rp = mem.write_port(), mem.read_port(transparent_for=())
        word_bits = (self.words - 1).bit_length()
        ptr = [Signal(word_bits, name=f"tile{t}_ptr") for t in range(self.tiles)]
        hdr = self.xb_payload.hdr
        tile = Signal(range(self.tiles))
        m.d.comb += tile.eq(hdr.tile[:max(1, (self.tiles - 1).bit_length())])
        mine = (hdr.kind == Kind.READ_CPL) & (hdr.tile < self.tiles)
        take = self.xb_valid & self.xb_ready & mine
        m.d.comb += [rp.addr.eq(self.rd_addr), self.rd_data.eq(rp.data)]
        with m.If(self.scrub):
            m.d.comb += [wp.en.eq(1), wp.addr.eq(self.scrub_addr), wp.data.eq(0)]
        with m.Else():
            sel = Const(0, word_bits)
            for t in range(self.tiles):
                sel = Mux(tile == t, ptr[t], sel)
            m.d.comb += [wp.en.eq(take), wp.data.eq(self.xb_payload.data),
                         wp.addr.eq((tile << word_bits) | sel if self.tiles > 1 else sel)]
            for t in range(self.tiles):
                with m.If(take & (tile == t)):
                    m.d.sync += ptr[t].eq(ptr[t] + 1)
        return m


class ItxDevice(wiring.Component):
    """sxp_system + tile memory + ICU reset scrub + exception pin (see the module doc)."""

    def __init__(self, contexts=16, entries=32, rcb=64, max_payload=256, max_read=1024, lanes=1,
                 *, tiles=4, words=64):
        check_int("tiles", tiles, 1, 16)
        check_int("words", words, 16, 4096)
        if words & (words - 1):
            raise ValueError(f"words must be a power of two, not {words}")
        self.system = SxpSystem(contexts=contexts, entries=entries, rcb=rcb,
                                max_payload=max_payload, max_read=max_read, lanes=lanes)
        self.tile_memory = TileMemory(tiles, words, lanes)
        self.tiles, self.words, self.lanes, self.contexts = tiles, words, lanes, contexts
        # the SXP's engines flush for GcmCore.flush_cycles (14) after a reset; the walk is
        # never shorter, so the link comes up after both
        self.scrub_cycles = max(tiles * words, 32)
        self.icu_regmap = icu_register_map()
        beat = beat_layout(lanes)
        sys = self.system
        bus = csr.Signature(sys.regmap.addr_width, sys.regmap.data_width)
        self._icu_regs = csr.RegisterFile(self.icu_regmap, ports=("icu",))
        super().__init__({
            "xb_i": In(stream.Signature(beat)),
            "xb_o": Out(stream.Signature(beat)),
            "pcie_o": Out(stream.Signature(beat)),
            "pcie_i": In(stream.Signature(beat)),
            "host": In(bus),
            "ccu": In(bus),
            "icu": In(csr.Signature(self.icu_regmap.addr_width, self.icu_regmap.data_width)),
            "irq": Out(1),
            "exc": Out(1),
            "hold": Out(1),
            "link_ready": Out(1),
            "rd_timeout": In(TIMEOUT_BITS),
            "tile_rd_addr": In(range(tiles * words)),
            "tile_rd_data": Out(128 * lanes),
        })
        self.regmap = sys.regmap

    def elaborate(self, platform):
        m = Module()
        m.submodules.system = sys = self.system
        m.submodules.tile_memory = tm = self.tile_memory
        m.submodules.icu_regs = regs = self._icu_regs
        wiring.connect(m, wiring.flipped(self.icu), regs.icu)

        # ---- ICU reset scrub: walk every tile-memory word, then bring the link up
        walk = Signal(range(self.scrub_cycles + 1))
        link = Signal()
        with m.If(~link):
            m.d.sync += walk.eq(walk + 1)
            with m.If(walk == self.scrub_cycles - 1):
                m.d.sync += link.eq(1)
        m.d.comb += [
            self.link_ready.eq(link),
            tm.scrub.eq(~link),
            tm.scrub_addr.eq(Mux(walk < tm.depth, walk, 0)),
        ]

        # ---- hold: the CCU stops the tiles until the next reset
        hold = Signal()
        with m.If(regs["HOLD"]["hold"].stb & regs["HOLD"]["hold"].data):
            m.d.sync += hold.eq(1)
        m.d.comb += self.hold.eq(hold)

        # ---- tiles: in while the link is up and nothing holds them; out to the exchange
        open_in = link & ~hold
        m.d.comb += [
            sys.xb_i.valid.eq(self.xb_i.valid & open_in),
            sys.xb_i.payload.eq(self.xb_i.payload),
            self.xb_i.ready.eq(sys.xb_i.ready & open_in),
        ]
        wiring.connect(m, sys.xb_o, wiring.flipped(self.xb_o))
        m.d.comb += [tm.xb_valid.eq(sys.xb_o.valid), tm.xb_ready.eq(self.xb_o.ready),
                     tm.xb_payload.eq(sys.xb_o.payload),
                     tm.rd_addr.eq(self.tile_rd_addr), self.tile_rd_data.eq(tm.rd_data)]

        # ---- host link: PCIe streams and the host CSR port only while the link is up
        link_r = Signal()           # the host port's read data is the cycle after r_stb
        m.d.sync += link_r.eq(link)
        m.d.comb += [
            sys.pcie_i.valid.eq(self.pcie_i.valid & link),
            sys.pcie_i.payload.eq(self.pcie_i.payload),
            self.pcie_i.ready.eq(sys.pcie_i.ready & link),
            self.pcie_o.valid.eq(sys.pcie_o.valid & link),
            self.pcie_o.payload.eq(sys.pcie_o.payload),
            sys.pcie_o.ready.eq(self.pcie_o.ready & link),
            sys.host.addr.eq(self.host.addr),
            sys.host.w_data.eq(self.host.w_data),
            sys.host.w_stb.eq(self.host.w_stb & link),
            sys.host.r_stb.eq(self.host.r_stb & link),
            self.host.r_data.eq(Mux(link_r, sys.host.r_data, 0)),
        ]
        wiring.connect(m, wiring.flipped(self.ccu), sys.ccu)
        m.d.comb += [self.irq.eq(sys.irq), sys.rd_timeout.eq(self.rd_timeout)]

        # ---- exception pin: SXP irq | read-table events (sticky until the CCU clears them)
        err_prev = Signal(COUNTER_BITS)
        tmo_prev = Signal(COUNTER_BITS)
        m.d.sync += [err_prev.eq(sys.rd_err_count), tmo_prev.eq(sys.rd_timeout_count)]
        bad_cpl, timed_out = Signal(), Signal()
        m.d.comb += [bad_cpl.eq(sys.rd_err_count != err_prev),
                     timed_out.eq(sys.rd_timeout_count != tmo_prev)]
        ev = regs["RD_EVENTS"]
        m.d.comb += [ev["bad_cpl"].set.eq(bad_cpl), ev["timeout"].set.eq(timed_out)]
        err_tag, err_cause, tmo_tag = Signal(TAG_BITS), Signal(RdCause), Signal(TAG_BITS)
        with m.If(bad_cpl):         # the record of the event the CCU will read
            m.d.sync += [err_tag.eq(sys.rd_err_tag), err_cause.eq(sys.rd_err_cause)]
        with m.If(timed_out):
            m.d.sync += tmo_tag.eq(sys.rd_timeout_tag)
        m.d.comb += [
            regs["RD_ERR"]["tag"].r.eq(err_tag),
            regs["RD_ERR"]["cause"].r.eq(err_cause),
            regs["RD_TIMEOUT"]["tag"].r.eq(tmo_tag),
            regs["ICU_STATUS"]["link_ready"].r.eq(link),
            regs["ICU_STATUS"]["hold"].r.eq(hold),
            regs["ICU_STATUS"]["sxp_exc"].r.eq(sys.irq),
            self.exc.eq(sys.irq | ev["bad_cpl"].q | ev["timeout"].q),
        ]
        return m
