"""``SXP``: the Secure Exchange Pipe (DESIGN.md § sxp; ports in docs/sxp.md).

Datapath (one beat = one 128-bit block per cycle and direction)::

    xb_i ─ W ingress: check on the first beat ─┬─ aes write beat ─┐            ┌─ W FIFO ─ pcie_o
           (drop / gcm / pass / read-hold)      ├─ pass ───────────┼─┐  gcm_core│  (credits)
                          read-hold slots ──────┘                  │ │ (shared, ├
    pcie_i ─ R ingress: check on the first beat ─ aes cpl beat ───┴─┼─ round  ─┤
                                               └─ pass ─────────────┘   robin)  └─ R FIFO ─ xb_o

- Ingress (one per direction). The first beat of a packet is checked from its header
  (:class:`~hw.sxp.regs.Cause`); verdict, physical context and header (``key_index`` set)
  are latched for the later beats, which cannot steer the packet. A dropped packet is
  consumed up to its ``last`` beat and nothing of it leaves. A passed one leaves with
  exactly ``hdr.length`` / 16 beats: if ``last`` comes early or late, MALFORMED, zero beats
  from there on, and an aes frame open in that direction is abandoned (docs/sxp.md).
- Frames: per physical context and direction one bit says a frame is open. The first beat
  of a packet on a context with no open frame is the IV (op IV), the last beat of a ``cc``
  packet is the tag slot (op MAC), every other beat is DATA.
- Engine: one :class:`~hw.gcm.GcmCore` for both directions, a round-robin arbiter, one
  output FIFO of ``out_depth`` beats per direction; an op issues only against a free slot
  (credits), so back-pressure on one output port never stalls the other direction. A meta
  FIFO carries direction, header and first/last of each op in engine order. Pass beats (no
  ``aes``) enter their FIFO once that direction has no op in the engine (order kept).
- Reads: an aes read request marks its physical context busy until an aes ``cc``
  completion with that ``key_index`` has been accepted on ``pcie_i``. A read to a busy
  context is parked in that context's holding slot (``xb_i`` keeps flowing); only a
  further read to a context whose slot is full stalls ``xb_i``. A parked read leaves as
  soon as its context is released.
- Completions: the tag-slot beat leaves carrying the tag if it verified, else zero (and
  exception AUTH, or FRAME when the engine refused an op).
- Framing errors cost no cycle on good traffic: beat counting runs beside the checks.

Registers: :func:`hw.sxp.regs.register_map` behind :class:`hw.csr.RegisterFile` with ports
``ccu`` and ``host``; in trusted mode every host write is refused and counted.
"""
from amaranth.hdl import Array, Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFO, SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

from hw import csr
from hw.gcm import GcmCore
from hw.gcm.layout import CTX_BITS, KEY_BITS, Op, check_contexts

from .packet import (BEAT_BYTES, MAX_FRAME_BYTES, MAX_PAYLOAD_BYTES, TILE_BITS, Header, Kind,
                     beat_layout)
from .regs import KEY_WORDS, REGIONS, XBCTX_ENTRIES, Cause, register_map

__all__ = ["SXP"]

BEAT_SHIFT = BEAT_BYTES.bit_length() - 1   # hdr.length >> BEAT_SHIFT = beats of a packet
NOP = 3     # an op code that is not an Op: gcm_core answers err and changes no state


def _wire(m, value, name, shape=None):
    sig = Signal(shape if shape is not None else len(value), name=name)
    m.d.comb += sig.eq(value)
    return sig


class SXP(wiring.Component):
    """Secure Exchange Pipe with *contexts* physical key contexts (1..16); *lanes* = 1.

    Ports: ``xb_i``, ``pcie_o``, ``pcie_i``, ``xb_o`` (streams of
    :func:`hw.sxp.packet.beat_layout`), ``host`` and ``ccu`` (:class:`hw.csr.Signature`),
    ``irq``.
    """

    def __init__(self, contexts=16, lanes=1, *, karatsuba=4):
        self.contexts = check_contexts(contexts)
        if isinstance(lanes, bool) or not isinstance(lanes, int):
            raise TypeError(f"lanes must be an int, not {lanes!r}")
        beat_layout(lanes)  # ValueError unless 1, 2 or 4
        if lanes != 1:
            raise ValueError(f"only lanes=1 is implemented, not {lanes}")
        self.lanes = lanes
        self.regmap = register_map(contexts)
        beat = beat_layout(lanes)
        bus = csr.Signature(self.regmap.addr_width, self.regmap.data_width)
        super().__init__({
            "xb_i": In(stream.Signature(beat)),
            "pcie_o": Out(stream.Signature(beat)),
            "pcie_i": In(stream.Signature(beat)),
            "xb_o": Out(stream.Signature(beat)),
            "host": In(bus),
            "ccu": In(bus),
            "irq": Out(1),
        })
        self._gcm = GcmCore(contexts, karatsuba=karatsuba)
        self.latency = self._gcm.latency + 2    # op issue → FIFO output register
        self.out_depth = self._gcm.latency + 4  # beats per direction FIFO = engine credits
        # key staging (attributes so that testbenches can check the reset scrub)
        self._key_stage = [Signal(32, name=f"key_stage{k}") for k in range(KEY_WORDS)]
        self._key_reg = Signal(KEY_BITS, name="key_reg")

    def elaborate(self, platform):
        m = Module()
        n = self.contexts
        beat = beat_layout(self.lanes)
        m.submodules.gcm = gcm = self._gcm

        # ---- registers -------------------------------------------------------------------
        trusted = Signal()
        m.submodules.regs = regs = csr.RegisterFile(
            self.regmap, ports=("ccu", "host"),
            write_allowed={"host": lambda rf, reg: ~trusted})
        wiring.connect(m, wiring.flipped(self.ccu), regs.ccu)
        wiring.connect(m, wiring.flipped(self.host), regs.host)
        kx = [regs[f"KXBCTXMAP{i}"]["phys"].q for i in range(XBCTX_ENTRIES)]
        kp = [regs[f"KPHYSMAP{p}"]["region"].q for p in range(n)]
        base = [regs[f"KSEL_BASE{r}"]["addr"].q for r in range(REGIONS)]
        limit = [regs[f"KSEL_LIMIT{r}"]["addr"].q for r in range(REGIONS)]

        def in_region(region, addr, length, name):
            b = _wire(m, Array(base)[region], f"{name}_base")
            lim = _wire(m, Array(limit)[region], f"{name}_limit")
            end = _wire(m, addr + length, f"{name}_end", 33)
            return _wire(m, (addr >= b) & (end <= lim), f"{name}_inside")

        def len_ok(length, maximum):
            return (length[:4] == 0) & (length != 0) & (length <= maximum)

        # ---- per-context state -------------------------------------------------------------
        wopen = Signal(n, name="wr_open")       # a write frame is open on the context
        ropen = Signal(n, name="rd_open")       # a read-completion frame is open
        rd_busy = Signal(n, name="rd_busy")     # an aes read is outstanding
        slot_v = Signal(n, name="slot_valid")   # a parked read waits
        slot_h = [Signal(Header, name=f"slot{c}_hdr") for c in range(n)]

        # ---- engine arbitration, meta FIFO, output FIFOs --------------------------------------
        meta_layout = data.StructLayout({"rd": 1, "hdr": Header, "first": 1, "last": 1,
                                         "zero": 1})    # zero: a framing-error beat
        m.submodules.meta = meta = SyncFIFO(width=meta_layout.size, depth=gcm.latency + 2)
        m.submodules.fifo_w = fifo_w = SyncFIFOBuffered(width=beat.size, depth=self.out_depth)
        m.submodules.fifo_r = fifo_r = SyncFIFOBuffered(width=beat.size, depth=self.out_depth)
        cnt_bits = (2 * self.out_depth).bit_length()
        inflight_w = Signal(cnt_bits)
        inflight_r = Signal(cnt_bits)
        credit_w = _wire(m, (fifo_w.level + inflight_w) < self.out_depth, "credit_w")
        credit_r = _wire(m, (fifo_r.level + inflight_r) < self.out_depth, "credit_r")
        rr = Signal()       # 1: the completion side has priority next

        # ---- W ingress (xb_i) ----------------------------------------------------------------
        xp, xh = self.xb_i.payload, self.xb_i.payload.hdr
        w_mid = Signal()                        # inside a packet: the next beat is not its first
        # Framing (docs/sxp.md "Malformed framing"): a packet that passed its check leaves
        # with exactly hdr.length / 16 beats whatever `last` says. w_idx counts the beats
        # emitted; w_pad: the input ended short, the SXP emits zero beats up to the declared
        # end; w_disc: the input ran past it, the rest up to `last` is consumed unseen.
        w_pad, w_disc = Signal(name="w_pad"), Signal(name="w_disc")
        w_idx = Signal(range(MAX_PAYLOAD_BYTES // BEAT_BYTES), name="w_idx")
        w_first = ~w_mid & ~w_pad
        w_phys_c = _wire(m, Array(kx)[xh.xbctx], "w_phys_c")
        w_region = _wire(m, Array(kp)[w_phys_c], "w_region")   # gated by w_phys_c < n
        w_map_ok = _wire(m, (w_phys_c < n) & (w_region != 0) & (w_region <= REGIONS - 1),
                         "w_map_ok")
        w_inside = in_region(Mux(xh.aes, w_region, 0), xh.addr, xh.length, "w")
        w_is_wr = xh.kind == Kind.WRITE_REQ
        w_is_rd = xh.kind == Kind.READ_REQ
        w_len_ok = Mux(w_is_rd, len_ok(xh.length, MAX_FRAME_BYTES) & self.xb_i.payload.last,
                       len_ok(xh.length, MAX_PAYLOAD_BYTES))
        w_open_cc1 = w_is_wr & xh.aes & xh.cc & (xh.length == BEAT_BYTES) & \
            ~wopen.bit_select(w_phys_c, 1)
        w_cause_c = Signal(Cause, name="w_cause_c")
        with m.If(~(w_is_wr | w_is_rd) | ~w_len_ok):
            m.d.comb += w_cause_c.eq(Cause.MALFORMED)
        with m.Elif(xh.aes & ~w_map_ok):
            m.d.comb += w_cause_c.eq(Cause.MAP)
        with m.Elif(w_open_cc1):
            m.d.comb += w_cause_c.eq(Cause.MALFORMED)
        with m.Elif(~w_inside):
            m.d.comb += w_cause_c.eq(Mux(xh.aes, Cause.REGION, Cause.CLEAR))

        DROP, GCM, PASS, READ = 0, 1, 2, 3
        w_mode_c = Mux(w_cause_c != Cause.NONE, DROP,
                       Mux(xh.aes, Mux(w_is_rd, READ, GCM), PASS))
        w_hdr_c = Signal(Header, name="w_hdr_c")
        m.d.comb += [w_hdr_c.eq(xh), w_hdr_c.key_index.eq(Mux(xh.aes, w_phys_c, 0))]
        w_mode_q, w_phys_q = Signal(2), Signal(CTX_BITS)
        w_hdr_q = Signal(Header)
        w_mode = _wire(m, Mux(w_first, w_mode_c, w_mode_q), "w_mode", 2)
        w_phys = _wire(m, Mux(w_first, w_phys_c, w_phys_q), "w_phys", CTX_BITS)
        w_hdr = Signal(Header, name="w_hdr")
        m.d.comb += w_hdr.eq(Mux(w_first, w_hdr_c, w_hdr_q))
        # payload packets are beat-counted; a read request (aes: READ, clear: PASS) is one
        # beat by its check and its length is the bytes requested
        w_live = _wire(m, ((w_mode == GCM) | (w_mode == PASS)) & (w_hdr.kind != Kind.READ_REQ),
                       "w_live")
        w_end = _wire(m, (w_idx + 1) == (w_hdr.length >> BEAT_SHIFT), "w_end")
        # the beat at which the framing turns out wrong (input `last` before the declared
        # end, or the declared end without `last`) and every pad beat leave as zero
        w_bad = _wire(m, w_live & ~w_pad & ~w_disc & (xp.last != w_end), "w_bad")
        w_zero = _wire(m, w_pad | w_bad, "w_zero")
        w_beat_v = Mux(w_pad, 1, self.xb_i.valid & ~w_disc)
        w_open_c = wopen.bit_select(w_phys, 1)
        w_iv = w_first & ~w_open_c
        w_mac = w_end & w_hdr.cc
        # a zero beat is an engine op that errs and changes nothing (NOP), except the first
        # one of a frame open in this direction: IV with block 0 on an active context, which
        # abandons the frame in the engine (it can never yield a tag)
        w_op = _wire(m, Mux(w_zero, Mux(~w_pad & w_open_c, Op.IV.value, NOP),
                            Mux(w_iv, Op.IV.value, Mux(w_mac, Op.MAC.value, Op.DATA.value))),
                     "w_op", 2)

        # parked reads: the lowest context whose slot is full and which is no longer busy
        rel = _wire(m, slot_v & ~rd_busy, "slot_release")
        rel_pend = rel.any()
        rel_ctx = Signal(CTX_BITS, name="slot_release_ctx")
        for c in reversed(range(n)):
            with m.If(rel[c]):
                m.d.comb += rel_ctx.eq(c)

        # a released parked read leaves between packets only (never inside one on pcie_o)
        w_hold = _wire(m, rel_pend & w_first, "w_hold")
        pass_ok_w = _wire(m, (inflight_w == 0) & fifo_w.w_rdy & ~w_hold, "pass_ok_w")
        busy_c = rd_busy.bit_select(w_phys, 1)
        slot_c = slot_v.bit_select(w_phys, 1)
        req_w = _wire(m, w_beat_v & (w_mode == GCM) & credit_w & meta.w_rdy & ~w_hold, "req_w")

        # ---- R ingress (pcie_i) --------------------------------------------------------------
        rp, rh = self.pcie_i.payload, self.pcie_i.payload.hdr
        r_mid = Signal()
        r_pad, r_disc = Signal(name="r_pad"), Signal(name="r_disc")     # as w_pad, w_disc
        r_idx = Signal(range(MAX_PAYLOAD_BYTES // BEAT_BYTES), name="r_idx")
        r_first = ~r_mid & ~r_pad
        r_open_cc1 = rh.aes & rh.cc & (rh.length == BEAT_BYTES) & \
            ~ropen.bit_select(rh.key_index, 1)
        r_cause_c = Signal(Cause, name="r_cause_c")
        with m.If((rh.kind != Kind.READ_CPL) | ~len_ok(rh.length, MAX_PAYLOAD_BYTES) | r_open_cc1):
            m.d.comb += r_cause_c.eq(Cause.MALFORMED)
        r_mode_c = Mux(r_cause_c != Cause.NONE, DROP, Mux(rh.aes, GCM, PASS))
        r_mode_q = Signal(2)
        r_hdr_q = Signal(Header)
        r_mode = _wire(m, Mux(r_first, r_mode_c, r_mode_q), "r_mode", 2)
        r_hdr = Signal(Header, name="r_hdr")
        m.d.comb += r_hdr.eq(Mux(r_first, rh, r_hdr_q))
        r_ctx = r_hdr.key_index
        r_live = _wire(m, (r_mode == GCM) | (r_mode == PASS), "r_live")
        r_end = _wire(m, (r_idx + 1) == (r_hdr.length >> BEAT_SHIFT), "r_end")
        r_bad = _wire(m, r_live & ~r_pad & ~r_disc & (rp.last != r_end), "r_bad")
        r_zero = _wire(m, r_pad | r_bad, "r_zero")
        r_beat_v = Mux(r_pad, 1, self.pcie_i.valid & ~r_disc)
        r_open_c = ropen.bit_select(r_ctx, 1)
        r_iv = r_first & ~r_open_c
        r_mac = r_end & r_hdr.cc
        r_op = _wire(m, Mux(r_zero, Mux(~r_pad & r_open_c, Op.IV.value, NOP),
                            Mux(r_iv, Op.IV.value, Mux(r_mac, Op.MAC.value, Op.DATA.value))),
                     "r_op", 2)
        pass_ok_r = _wire(m, (inflight_r == 0) & fifo_r.w_rdy, "pass_ok_r")
        req_r = _wire(m, r_beat_v & (r_mode == GCM) & credit_r & meta.w_rdy, "req_r")

        # ---- arbiter -------------------------------------------------------------------------
        pick_r = _wire(m, req_r & (~req_w | rr), "pick_r")
        gi = gcm.i.payload
        m.d.comb += [
            gcm.i.valid.eq(req_w | req_r),
            gi.block.eq(Mux(pick_r, Mux(r_zero, 0, rp.data), Mux(w_zero, 0, xp.data))),
            gi.ctx.eq(Mux(pick_r, r_ctx, w_phys)),
            gi.op.as_value().eq(Mux(pick_r, r_op, w_op)),
            gi.decrypt.eq(pick_r),
        ]
        issue = _wire(m, gcm.i.valid & gcm.i.ready, "issue")
        issue_w = issue & ~pick_r
        issue_r = issue & pick_r
        with m.If(issue):
            m.d.sync += rr.eq(~pick_r)
        meta_in = Signal(meta_layout)
        m.d.comb += [
            meta_in.rd.eq(pick_r),
            meta_in.hdr.eq(Mux(pick_r, r_hdr, w_hdr)),
            meta_in.first.eq(Mux(pick_r, r_first, w_first)),
            meta_in.last.eq(Mux(pick_r, r_end, w_end)),
            meta_in.zero.eq(Mux(pick_r, r_zero, w_zero)),
            meta.w_en.eq(issue),
            meta.w_data.eq(meta_in),
        ]

        # ---- ingress handshakes and state updates --------------------------------------------
        w_to_slot = (w_mode == READ) & busy_c & ~slot_c
        w_read_pass = (w_mode == READ) & ~busy_c & ~slot_c
        w_pad_pass = _wire(m, w_pad & (w_mode == PASS) & pass_ok_w, "w_pad_pass")
        with m.If(w_disc):
            m.d.comb += self.xb_i.ready.eq(1)
        with m.Elif(~w_pad):
            with m.Switch(w_mode):
                with m.Case(DROP):
                    m.d.comb += self.xb_i.ready.eq(1)
                with m.Case(GCM):
                    m.d.comb += self.xb_i.ready.eq(issue_w)
                with m.Case(PASS):
                    m.d.comb += self.xb_i.ready.eq(pass_ok_w)
                with m.Case(READ):
                    m.d.comb += self.xb_i.ready.eq(w_to_slot | (w_read_pass & pass_ok_w))
        w_take = _wire(m, self.xb_i.valid & self.xb_i.ready, "w_take")
        with m.If(w_take):
            m.d.sync += w_mid.eq(~xp.last)
            with m.If(w_first):
                m.d.sync += [w_mode_q.eq(w_mode_c), w_phys_q.eq(w_phys_c), w_hdr_q.eq(w_hdr_c)]
            with m.If(w_disc & xp.last):
                m.d.sync += w_disc.eq(0)
        # a beat of an accepted payload packet leaves (input beat, or a pad beat)
        w_step = _wire(m, (w_take & w_live & ~w_disc) | (issue_w & w_pad) | w_pad_pass, "w_step")
        with m.If(w_step):
            with m.If(w_end):
                m.d.sync += [w_idx.eq(0), w_pad.eq(0), w_disc.eq(~w_pad & ~xp.last)]
            with m.Else():
                m.d.sync += [w_idx.eq(w_idx + 1), w_pad.eq(w_pad | xp.last)]

        r_pad_pass = _wire(m, r_pad & (r_mode == PASS) & pass_ok_r, "r_pad_pass")
        with m.If(r_disc):
            m.d.comb += self.pcie_i.ready.eq(1)
        with m.Elif(~r_pad):
            with m.Switch(r_mode):
                with m.Case(DROP):
                    m.d.comb += self.pcie_i.ready.eq(1)
                with m.Case(GCM):
                    m.d.comb += self.pcie_i.ready.eq(issue_r)
                with m.Case(PASS):
                    m.d.comb += self.pcie_i.ready.eq(pass_ok_r)
        r_take = _wire(m, self.pcie_i.valid & self.pcie_i.ready, "r_take")
        with m.If(r_take):
            m.d.sync += r_mid.eq(~rp.last)
            with m.If(r_first):
                m.d.sync += [r_mode_q.eq(r_mode_c), r_hdr_q.eq(rh)]
            with m.If(r_disc & rp.last):
                m.d.sync += r_disc.eq(0)
        r_step = _wire(m, (r_take & r_live & ~r_disc) | (issue_r & r_pad) | r_pad_pass, "r_step")
        with m.If(r_step):
            with m.If(r_end):
                m.d.sync += [r_idx.eq(0), r_pad.eq(0), r_disc.eq(~r_pad & ~rp.last)]
            with m.Else():
                m.d.sync += [r_idx.eq(r_idx + 1), r_pad.eq(r_pad | rp.last)]
        # the read is over when its cc completion has been accepted (dropped or not)
        r_release = r_take & rp.last & (r_hdr.kind == Kind.READ_CPL) & r_hdr.aes & r_hdr.cc

        slot_out = _wire(m, w_hold & (inflight_w == 0) & fifo_w.w_rdy, "slot_out")
        for c in range(n):
            with m.If(issue_w & (w_phys == c)):
                with m.If(w_zero):          # a framing error ends the frame
                    m.d.sync += wopen[c].eq(0)
                with m.Elif(w_op == Op.IV):
                    m.d.sync += wopen[c].eq(1)
                with m.Elif(w_op == Op.MAC):
                    m.d.sync += wopen[c].eq(0)
            with m.If(issue_r & (r_ctx == c)):
                with m.If(r_zero):
                    m.d.sync += ropen[c].eq(0)
                with m.Elif(r_op == Op.IV):
                    m.d.sync += ropen[c].eq(1)
                with m.Elif(r_op == Op.MAC):
                    m.d.sync += ropen[c].eq(0)
            with m.If((w_take & w_read_pass & (w_phys == c)) | (slot_out & (rel_ctx == c))):
                m.d.sync += rd_busy[c].eq(1)
            with m.Elif(r_release & (r_ctx == c)):
                m.d.sync += rd_busy[c].eq(0)
            with m.If(w_take & w_to_slot & (w_phys == c)):
                m.d.sync += [slot_v[c].eq(1), slot_h[c].eq(w_hdr)]
            with m.Elif(slot_out & (rel_ctx == c)):
                m.d.sync += slot_v[c].eq(0)

        # ---- engine output → FIFOs -----------------------------------------------------------
        mh = Signal(meta_layout, name="meta_head")
        m.d.comb += mh.eq(meta.r_data)
        go = gcm.o.payload
        o_take = gcm.o.valid            # o.ready is 1: credits reserved the FIFO slot
        m.d.comb += [gcm.o.ready.eq(1), meta.r_en.eq(o_take)]
        rd_fail = mh.rd & (go.op == Op.MAC) & ~go.tag_ok
        eng_beat = Signal(beat, name="eng_beat")
        m.d.comb += [eng_beat.data.eq(Mux(rd_fail | mh.zero, 0, go.block)), eng_beat.hdr.eq(mh.hdr),
                     eng_beat.first.eq(mh.first), eng_beat.last.eq(mh.last)]
        with m.If(issue_w & ~(o_take & ~mh.rd)):
            m.d.sync += inflight_w.eq(inflight_w + 1)
        with m.Elif(~issue_w & (o_take & ~mh.rd)):
            m.d.sync += inflight_w.eq(inflight_w - 1)
        with m.If(issue_r & ~(o_take & mh.rd)):
            m.d.sync += inflight_r.eq(inflight_r + 1)
        with m.Elif(~issue_r & (o_take & mh.rd)):
            m.d.sync += inflight_r.eq(inflight_r - 1)

        w_pass_beat = Signal(beat, name="w_pass_beat")
        m.d.comb += [w_pass_beat.hdr.eq(w_hdr), w_pass_beat.first.eq(w_first),
                     w_pass_beat.last.eq(~w_live | w_end),
                     w_pass_beat.data.eq(Mux((w_mode == READ) | w_zero, 0, xp.data))]
        slot_beat = Signal(beat, name="slot_beat")
        m.d.comb += [slot_beat.hdr.eq(Array(slot_h)[rel_ctx]), slot_beat.first.eq(1),
                     slot_beat.last.eq(1)]
        w_pass_take = (w_take & ~w_disc & ((w_mode == PASS) | ((w_mode == READ) & w_read_pass))) | \
            w_pad_pass
        with m.If(o_take & ~mh.rd):
            m.d.comb += [fifo_w.w_en.eq(1), fifo_w.w_data.eq(eng_beat)]
        with m.Elif(slot_out):
            m.d.comb += [fifo_w.w_en.eq(1), fifo_w.w_data.eq(slot_beat)]
        with m.Elif(w_pass_take):
            m.d.comb += [fifo_w.w_en.eq(1), fifo_w.w_data.eq(w_pass_beat)]

        r_pass_beat = Signal(beat, name="r_pass_beat")
        m.d.comb += [r_pass_beat.hdr.eq(r_hdr), r_pass_beat.first.eq(r_first),
                     r_pass_beat.last.eq(r_end), r_pass_beat.data.eq(Mux(r_zero, 0, rp.data))]
        with m.If(o_take & mh.rd):
            m.d.comb += [fifo_r.w_en.eq(1), fifo_r.w_data.eq(eng_beat)]
        with m.Elif((r_take & ~r_disc & (r_mode == PASS)) | r_pad_pass):
            m.d.comb += [fifo_r.w_en.eq(1), fifo_r.w_data.eq(r_pass_beat)]

        for fifo, port in ((fifo_w, self.pcie_o), (fifo_r, self.xb_o)):
            m.d.comb += [port.valid.eq(fifo.r_rdy), port.payload.eq(fifo.r_data),
                         fifo.r_en.eq(port.ready)]

        # ---- keys ----------------------------------------------------------------------------
        kst, kreg = self._key_stage, self._key_reg
        kpend = Signal()
        kctx = Signal(CTX_BITS)
        commit = regs["KEY_COMMIT"]["ctx"]
        for k in range(KEY_WORDS):
            f = regs[f"KEY_W{k}"]["key"]
            with m.If(f.stb):
                m.d.sync += kst[k].eq(f.data)
        with m.If(gcm.key.valid & gcm.key.ready):
            m.d.sync += [kpend.eq(0), kreg.eq(0), kctx.eq(0)]
        with m.If(commit.stb & ~kpend):
            m.d.sync += [kpend.eq(1), kreg.eq(Cat(*kst)), kctx.eq(commit.data)]
            m.d.sync += [s.eq(0) for s in kst]
        m.d.comb += [gcm.key.valid.eq(kpend), gcm.key.payload.ctx.eq(kctx),
                     gcm.key.payload.key.eq(kreg)]

        # ---- trusted mode ----------------------------------------------------------------------
        phys_ok = [(r != 0) & (r <= REGIONS - 1) for r in kp]
        phys_ok += [kp[a] != kp[b] for a in range(n) for b in range(a + 1, n)]
        nonempty = [base[r] < limit[r] for r in range(REGIONS)]
        disjoint = [~(nonempty[i] & nonempty[j] & (base[i] < limit[j]) & (base[j] < limit[i]))
                    for i in range(REGIONS) for j in range(i + 1, REGIONS)]
        cfg_ok = _wire(m, Cat(*phys_ok, *disjoint).all(), "cfg_ok")
        trust = regs["CTRL"]["trust"]
        trust_req = trust.stb & trust.data[0] & ~trusted
        with m.If(trust_req & cfg_ok):
            m.d.sync += trusted.eq(1)

        # ---- exceptions ----------------------------------------------------------------------
        eng_exc = o_take & ~mh.zero & (go.err | rd_fail)   # a zero beat's err is expected
        events = [   # (valid, cause, header) in priority order (the first wins a cycle)
            (eng_exc, Mux(go.err, Cause.FRAME, Cause.AUTH), mh.hdr),
            (w_take & w_first & (w_cause_c != Cause.NONE), w_cause_c, xh),
            (w_take & w_bad, Cause.MALFORMED, w_hdr),       # framing: once per packet
            (r_take & r_first & (r_cause_c != Cause.NONE), r_cause_c, rh),
            (r_take & r_bad, Cause.MALFORMED, r_hdr),
            (trust_req & ~cfg_ok, Cause.CONFIG, None),
        ]
        status = regs["STATUS"]
        exc_q = status["exc"].q
        rec_cause = Signal(Cause, name="exc_cause")
        rec_addr, rec_tile, rec_kind = Signal(32), Signal(TILE_BITS), Signal(2)
        with m.If(~exc_q):
            for k, (valid, cause, hdr) in enumerate(events):
                cond = m.If if k == 0 else m.Elif
                with cond(valid):
                    m.d.sync += rec_cause.eq(cause)
                    if hdr is None:
                        m.d.sync += [rec_addr.eq(0), rec_tile.eq(0), rec_kind.eq(0)]
                    else:
                        m.d.sync += [rec_addr.eq(hdr.addr), rec_tile.eq(hdr.tile),
                                     rec_kind.eq(hdr.kind)]
        any_exc = Cat(*(e[0] for e in events))
        exc_count = Signal(32)
        denied = Signal(32)
        m.d.sync += exc_count.eq(exc_count + sum(any_exc[k] for k in range(len(events))))
        with m.If(regs.bridges["host"].denied):
            m.d.sync += denied.eq(denied + 1)
        m.d.comb += [
            status["exc"].set.eq(any_exc.any()),
            status["trusted"].r.eq(trusted),
            status["key_busy"].r.eq(kpend),
            status["cause"].r.eq(rec_cause),
            regs["EXC_ADDR"]["addr"].r.eq(rec_addr),
            regs["EXC_TILE"]["tile"].r.eq(rec_tile),
            regs["EXC_TILE"]["kind"].r.eq(rec_kind),
            regs["EXC_COUNT"]["count"].r.eq(exc_count),
            regs["DENIED"]["count"].r.eq(denied),
            regs["RD_BUSY"]["ctx"].r.eq(rd_busy),
            self.irq.eq(exc_q),
        ]
        return m
