"""``CCDma`` (design ``cc_dma``): the H100-style encrypting DMA engine between protected
device memory and a shared bounce buffer, built on one :class:`~hw.gcm.GcmCore`.

One descriptor is one frame. ``OUT`` (device → host) reads ``len`` blocks of protected
memory and writes ``IV ‖ ciphertext ‖ tag`` (``len + 2`` blocks) to the bounce buffer;
``IN`` (host → device) reads such a frame from the bounce buffer, decrypts and
authenticates it into an on-chip staging slot and copies the plaintext to protected
memory only once the tag has matched.

Datapath (one block per cycle; every box honours back-pressure)::

    desc ─ check ─ issuer ─ rd_req     rd_resp ─ consumer ─ ▯ gcm_core.i   gcm_core.o ▯ ─ output ─┬ wr (OUT frames)
          (2 reg  │ (region                ▲  (IV counter, replay,   (contexts =          stage ├ staging (IN data)
          stages) └── cmd FIFO ────────────┘   slots, key priority)   channels)                └ completion FIFO
                                                                                                   ─ commit ─ wr, status

  (▯: a skid-buffer register stage, :class:`hw.common.SkidBuffer`.)

- Memories are the testbench's (streams ``rd_req``/``rd_resp`` in order, any latency,
  ``wr`` posted): the engine stays at one block per cycle without owning device memory,
  and tests load and inspect memory in Python. The staging buffer is on chip
  (``slots`` × ``frame_blocks`` blocks of ``lib.memory.Memory``) because nothing outside
  may see unauthenticated plaintext.
- IV block (= gcm_core J0, :data:`hw.cc.layout.iv_layout`): counter (bytes 0..3), direction,
  channel, zeros, ``00 00 00 01``. Per channel: ``tx_next`` (next outbound counter) and
  ``rx_next`` (lowest acceptable inbound counter), both set to the key port's ``iv`` on a
  key install. Counter 2^32 − 1 is never used: an ``OUT`` on a channel whose ``tx_next``
  reached it is refused with ``IV_EXHAUSTED``. An ``IN`` frame is accepted only if its
  IV has this channel, direction ``IN``, zero padding, and ``rx_next`` ≤ counter <
  2^32 − 1; ``rx_next`` becomes counter + 1 when the frame is *checked* (before its tag
  is known), so two frames of one channel in flight cannot both use one counter; a frame
  that then fails authentication has consumed its counter (documented, docs/cc.md).
- Errors found by the issuer (``CHANNEL``, ``LENGTH``, ``REGION``) issue no read; errors
  found by the consumer (``NO_KEY``, ``IV_EXHAUSTED``, ``BAD_IV``, ``REPLAY``) discard the
  frame's reads without sending anything to the engine. In both cases the status waits
  until every earlier frame has left the engine, so ``status`` is in descriptor order.
- Keys (``key`` stream, the trusted port) are installed only between frames with no
  frame in flight: a pending install stops the consumer from starting frames.
- Reset scrub (a reset of ``cc_dma`` is the FLR: in a chip its ``rst`` is cc_ctrl's
  ``rst | flr``): the key state — gcm_core's contexts, the IV counters, the key flags —
  clears in the reset cycle; then a walk writes zero to every staging word, one per
  cycle, :attr:`CCDma.scrub_cycles` = ``slots`` × ``frame_blocks`` cycles (256 at the
  defaults), while ``desc`` and ``key`` are refused. The staging buffer is the one place
  that holds decrypted plaintext of frames whose tag failed or was never checked.

Timing (every path of the block's own logic ≤ 24 gate levels, ``make synth``; docs/cc.md):
the descriptor checks are spread over :class:`DescCheck`'s two register stages (counts and
field checks, then the range ends) and the issuer (the four region compares); counters,
IV counters and addresses use log-depth incrementers and comparators (:mod:`hw.common.arith`;
ABC folds ``+`` and ``<`` into ripple chains); the commit keeps a running address instead
of adding ``dst + k``; the command FIFO's head is a register carrying the channel one-hot
(the head's channel state is an AND-OR select) and an exhausted ``tx_next`` is a flag;
the late inbound IV verdict meets flat start nets and a holding register in front of
``info_q``; skid buffers on both sides of ``gcm_core`` stop its global stall (``o.ready``)
from chaining the output stage, the engine and the consumer into one path. All of it adds
latency (a few cycles per copy), not bubbles: one block per cycle is kept.

Parameters: *channels* (1..16 gcm_core contexts; default 4 to keep the build small),
*frame_blocks* (largest frame, data blocks, a power of two), *slots* (staging slots, a
power of two ≥ 2: with 4 the commit of one frame overlaps the decryption of the next
three), *addr_bits* (block address width). The regions ``prot_base``/``prot_limit``
(protected memory) and ``bb_base``/``bb_limit`` (bounce buffer) are inputs: block
addresses, [base, limit), set by the trusted side.
"""
from types import SimpleNamespace

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from hw.common import SkidBuffer, add, at_least, at_most, decrement, increment, wire
from hw.gcm import GcmCore, Op

from .layout import (
    BLOCK_BITS,
    CTR_BITS,
    CTR_LIMIT,
    CTX_BITS,
    DESC_TAG_BITS,
    IV_TAIL,
    LEN_BITS,
    Dir,
    Status,
    desc_layout,
    dma_key_layout,
    iv_layout,
    rd_req_layout,
    rd_resp_layout,
    status_layout,
    wr_layout,
)

__all__ = ["CCDma", "DescCheck", "RespStage", "checked_layout", "resp_stage_layout"]

CNT_BITS = LEN_BITS + 1             # block counts of a frame: len + 2 fits


def _pow2(v):
    return isinstance(v, int) and not isinstance(v, bool) and v >= 1 and v & (v - 1) == 0


def _select(onehot, values):
    """``values[k]`` for the set bit *k* of *onehot* (0 if none): an AND-OR."""
    out = Const(0, len(values[0]))
    for k, v in enumerate(values):
        out = out | Mux(onehot[k], v, 0)
    return out


def checked_layout(addr_bits):
    """A descriptor leaving :class:`DescCheck`: its fields, the blocks it reads (``n_src``)
    and writes (``n_dst``), the ends of both ranges (one bit wider than an address, so a
    range past the top of the address space fails its limit) and the code of the checks
    that need no region (``CHANNEL``, ``LENGTH`` or ``OK``)."""
    return data.StructLayout({
        "desc": desc_layout(addr_bits),
        "n_src": CNT_BITS,
        "n_dst": CNT_BITS,
        "src_end": addr_bits + 1,
        "dst_end": addr_bits + 1,
        "code": Status,
    })


class DescCheck(wiring.Component):
    """Two register stages in front of ``cc_dma``'s issuer, so that its region compares
    start from registers (one long path of adder then comparator is cut in two):

    1. the block counts (OUT reads ``len`` protected blocks and writes ``len + 2`` bounce
       blocks, IN the reverse) and the channel and length checks;
    2. the range ends ``src + n_src`` and ``dst + n_dst`` (log-depth adders).

    One descriptor per cycle; ``i.ready`` is high while a stage is empty or moves on.
    Descriptors are not secret: the stage registers have no reset (their valids do).
    """

    def __init__(self, channels, frame_blocks, addr_bits):
        self._channels, self._frame_blocks, self._addr_bits = channels, frame_blocks, addr_bits
        super().__init__({
            "i": In(stream.Signature(desc_layout(addr_bits))),
            "o": Out(stream.Signature(checked_layout(addr_bits))),
        })

    def elaborate(self, platform):
        m = Module()
        layout = checked_layout(self._addr_bits)
        s1 = Signal(layout, name="s1", reset_less=True)
        s2 = Signal(layout, name="s2", reset_less=True)
        v1, v2 = Signal(), Signal()
        move2 = wire(m, ~v2 | self.o.ready, "move2")
        move1 = wire(m, ~v1 | move2, "move1")
        m.d.comb += [self.i.ready.eq(move1), self.o.valid.eq(v2), self.o.payload.eq(s2)]

        d = self.i.payload
        plus2 = Cat(d.len[0], increment(m, Cat(d.len[1:], Const(0, 1)), "len_plus2"))
        out = d.dir == Dir.OUT
        too_long = at_least(m, d.len, self._frame_blocks + 1, "len_over")
        code = Signal(Status)
        with m.If(d.ch >= self._channels):
            m.d.comb += code.eq(Status.CHANNEL)
        with m.Elif((d.len == 0) | too_long):
            m.d.comb += code.eq(Status.LENGTH)
        with m.Else():
            m.d.comb += code.eq(Status.OK)
        with m.If(move1):
            m.d.sync += [v1.eq(self.i.valid), s1.desc.eq(d), s1.code.eq(code),
                         s1.n_src.eq(Mux(out, d.len, plus2)), s1.n_dst.eq(Mux(out, plus2, d.len))]

        ab1 = self._addr_bits + 1
        src_end = add(m, s1.desc.src, s1.n_src, ab1, "src_end")
        dst_end = add(m, s1.desc.dst, s1.n_dst, ab1, "dst_end")
        with m.If(move2):
            m.d.sync += [v2.eq(v1), s2.eq(s1), s2.src_end.eq(src_end), s2.dst_end.eq(dst_end)]
        return m


def resp_stage_layout(channels):
    """A read beat after :class:`RespStage`, with its verdicts as an inbound IV block for
    each channel *c*: ``fmt_ok[c]`` (direction ``IN``, channel *c*, zero padding, tail)
    and ``new_ok[c]`` (``rx_next[c]`` ≤ counter < 2^32 − 1)."""
    return data.StructLayout({"data": BLOCK_BITS, "fmt_ok": channels, "new_ok": channels})


class RespStage(wiring.Component):
    """A register stage on ``rd_resp`` that checks every beat as an inbound IV block a
    cycle ahead, for every channel at once, so the consumer's verdict is a select of
    flags instead of a 32-bit compare in front of its frame-start logic.

    The flags of the beat held in ``o`` were computed one cycle earlier (from the beat
    arriving, or from the held one) against that cycle's ``rx_next``; ``fresh`` is low in
    the cycle after ``rx_changed`` (an install or a bump wrote ``rx_next``), when they may
    be stale. ``i.ready`` = ``~o.valid | o.ready``: one beat per cycle. The beat register
    resets to zero (it may hold protected plaintext) and loads valid beats only.
    """

    def __init__(self, channels, *, _formal_mutant=None):
        self._channels = channels
        # test-only seeded bug for formal/cc.py (never set in a design): "replay_off_by_one"
        # accepts counter rx_next - 1 (the last one accepted) as new
        if _formal_mutant not in (None, "replay_off_by_one"):
            raise ValueError(f"unknown _formal_mutant {_formal_mutant!r}")
        self._formal_mutant = _formal_mutant
        super().__init__({
            "i": In(stream.Signature(rd_resp_layout)),
            "o": Out(stream.Signature(resp_stage_layout(channels))),
            "rx_next": In(CTR_BITS * channels),
            "rx_changed": In(1),
            "fresh": Out(1),
        })

    def _flags(self, m, block, name):
        iv = data.View(iv_layout, block)
        form = (iv.tail == IV_TAIL) & (iv.zero == 0) & (iv.dir == Dir.IN.value)
        fresh_ctr = iv.ctr != CTR_LIMIT
        fmt = Cat(*(form & (iv.ch == c) for c in range(self._channels)))
        ctr = iv.ctr + 1 if self._formal_mutant == "replay_off_by_one" else iv.ctr
        new = Cat(*(fresh_ctr & at_least(m, ctr, self.rx_next.word_select(c, CTR_BITS),
                                         f"{name}_order{c}")
                    for c in range(self._channels)))
        return fmt, new

    def elaborate(self, platform):
        m = Module()
        nch = self._channels
        valid, beat = Signal(), Signal(BLOCK_BITS)
        loaded, changed = Signal(), Signal()
        m.d.comb += [self.i.ready.eq(~valid | self.o.ready), self.o.valid.eq(valid),
                     self.o.payload.data.eq(beat), self.fresh.eq(~changed)]
        with m.If(self.i.ready):
            m.d.sync += valid.eq(self.i.valid)
        # only a valid beat is taken: an idle bus may still show the last beat it carried
        # (protected plaintext), which must not refill the register after a reset
        with m.If(self.i.ready & self.i.valid):
            m.d.sync += beat.eq(self.i.payload.data)
        m.d.sync += [loaded.eq(self.i.ready), changed.eq(self.rx_changed)]
        # flags of both candidates for the next held beat, picked by which one it is
        in_fmt, in_new = self._flags(m, self.i.payload.data, "in")
        held_fmt, held_new = self._flags(m, beat, "held")
        fmt_in, new_in = Signal(nch), Signal(nch)
        fmt_held, new_held = Signal(nch), Signal(nch)
        m.d.sync += [fmt_in.eq(in_fmt), new_in.eq(in_new),
                     fmt_held.eq(held_fmt), new_held.eq(held_new)]
        m.d.comb += [self.o.payload.fmt_ok.eq(Mux(loaded, fmt_in, fmt_held)),
                     self.o.payload.new_ok.eq(Mux(loaded, new_in, new_held))]
        return m


class CCDma(wiring.Component):
    """Encrypting bounce-buffer DMA (see the module docstring).

    Ports: ``desc`` In stream (:func:`~hw.cc.layout.desc_layout`), ``status`` Out stream
    (:data:`~hw.cc.layout.status_layout`), ``key`` In stream
    (:data:`~hw.cc.layout.dma_key_layout`), ``rd_req`` Out / ``rd_resp`` In / ``wr`` Out
    streams to device memory, region inputs ``prot_base``, ``prot_limit``, ``bb_base``,
    ``bb_limit``.
    """

    MUTANTS = ("commit_before_tag", "commit_on_tag_fail", "commit_stale_word", "commit_addr_fixed",
               "commit_one_short", "ctr_wraps", "tx_not_advanced", "replay_off_by_one")

    def __init__(self, channels=4, *, frame_blocks=64, slots=4, addr_bits=32, karatsuba=4,
                 _formal_mutant=None):
        if isinstance(channels, bool) or not isinstance(channels, int) or not 1 <= channels <= 16:
            raise ValueError(f"channels must be an int in 1..16, not {channels!r}")
        if not _pow2(frame_blocks) or frame_blocks >= 1 << (LEN_BITS - 1):
            raise ValueError(f"frame_blocks must be a power of two below 2^{LEN_BITS - 1}, "
                             f"not {frame_blocks!r}")
        if not _pow2(slots) or slots < 2:
            raise ValueError(f"slots must be a power of two >= 2, not {slots!r}")
        if isinstance(addr_bits, bool) or not isinstance(addr_bits, int) or not 8 <= addr_bits <= 48:
            raise ValueError(f"addr_bits must be an int in 8..48, not {addr_bits!r}")
        self.channels, self.frame_blocks, self.slots = channels, frame_blocks, slots
        self.addr_bits = addr_bits
        # test-only seeded bugs for formal/cc.py (never set in a design): "commit_before_tag"
        # writes an inbound frame's plaintext to wr as it leaves gcm_core (cut-through);
        # "commit_on_tag_fail" commits a frame whose tag failed; "commit_stale_word" writes
        # the staging read port's previous word; "commit_addr_fixed" writes every block of a
        # committed frame to its first address (the running address is not advanced);
        # "commit_one_short" ends a commit one block early (off by one on the frame's length:
        # its last block is never written, the status says OK); "ctr_wraps" never marks tx_next spent after
        # a bump (it uses 2^32 - 1, then wraps); "tx_not_advanced" bumps no tx_next when an
        # outbound frame starts; "replay_off_by_one" (RespStage) accepts the last counter
        if _formal_mutant not in (None, *self.MUTANTS):
            raise ValueError(f"unknown _formal_mutant {_formal_mutant!r}")
        self._formal_mutant = _formal_mutant
        # The reset scrub writes zero to one staging word per cycle: `desc` and `key` are
        # refused for this many cycles after reset (from the first cycle with rst low).
        self.scrub_cycles = slots * frame_blocks
        super().__init__({
            "desc": In(stream.Signature(desc_layout(addr_bits))),
            "status": Out(stream.Signature(status_layout)),
            "key": In(stream.Signature(dma_key_layout)),
            "rd_req": Out(stream.Signature(rd_req_layout(addr_bits))),
            "rd_resp": In(stream.Signature(rd_resp_layout)),
            "wr": Out(stream.Signature(wr_layout(addr_bits))),
            "prot_base": In(addr_bits),
            "prot_limit": In(addr_bits),
            "bb_base": In(addr_bits),
            "bb_limit": In(addr_bits),
        })
        self._gcm = GcmCore(channels, karatsuba=karatsuba)

    def elaborate(self, platform):
        m = Module()
        m.submodules.gcm = gcm = self._gcm
        ab, nch, slot_bits = self.addr_bits, self.channels, (self.slots - 1).bit_length()
        # Register stages around gcm_core: its o.ready is its global stall and its i.ready
        # follows that stall, so without them the output stage's decision would run through
        # gcm_core into the consumer; both carry blocks (plaintext), so they reset to zero.
        m.submodules.gcm_in = gin = SkidBuffer(gcm.i.payload.shape(), reset_less=False)
        m.submodules.gcm_out = gout = SkidBuffer(gcm.o.payload.shape(), reset_less=False)
        wiring.connect(m, gin.o, gcm.i)
        wiring.connect(m, gcm.o, gout.i)

        cmd_layout = data.StructLayout({       # sel: the channel one-hot (a cheap state select)
            "dir": Dir, "ch": CTX_BITS, "sel": nch, "len": LEN_BITS, "dst": ab,
            "tag": DESC_TAG_BITS, "code": Status})
        info_layout = data.StructLayout({       # one per frame inside gcm_core
            "dir": Dir, "dst": ab, "tag": DESC_TAG_BITS, "ctr": CTR_BITS, "slot": max(1, slot_bits),
            "len": LEN_BITS})
        done_layout = data.StructLayout({       # one per finished descriptor, in order
            "tag": DESC_TAG_BITS, "code": Status, "ctr": CTR_BITS, "commit": 1,
            "free_slot": 1, "slot": max(1, slot_bits), "dst": ab, "len": LEN_BITS})
        # cmd_q's head is a register (buffered FIFO): the consumer's decisions start there
        m.submodules.cmd_q = cmd_q = fifo.SyncFIFOBuffered(width=cmd_layout.size, depth=4)
        m.submodules.info_q = info_q = fifo.SyncFIFO(width=info_layout.size, depth=8)
        m.submodules.done_q = done_q = fifo.SyncFIFO(width=done_layout.size, depth=8)
        net = SimpleNamespace(
            gcm=gcm, gin=gin.i, gout=gout.o, cmd_q=cmd_q, info_q=info_q, done_q=done_q,
            cmd=data.View(cmd_layout, cmd_q.r_data), info=data.View(info_layout, info_q.r_data),
            done=data.View(done_layout, done_q.r_data),
            cmd_w=Signal(cmd_layout), info_w=Signal(info_layout), done_w=Signal(done_layout),
            info_push=Signal(), info_room=Signal(),
            # per-channel state
            has_key=Signal(nch),
            tx_spent=Signal(nch),       # tx_next == CTR_LIMIT, kept as a flag (no 32-bit compare)
            tx_next=[Signal(CTR_BITS, name=f"tx_next{c}") for c in range(nch)],
            rx_next=[Signal(CTR_BITS, name=f"rx_next{c}") for c in range(nch)],
            # frames sent into gcm_core whose MAC has not come out (at most info_q's depth)
            inflight=Signal(4), inc_inflight=Signal(), dec_inflight=Signal(),
            slots_used=Signal(slot_bits + 1), slot_next=Signal(max(1, slot_bits)),
            alloc_slot=Signal(), free_slot=Signal(),
            cur_code=Signal(Status), cur_ctr=Signal(CTR_BITS),   # a refused frame's status
            drain_push=Signal(), key_ok=Signal(), commit_owns=Signal(),
            tx_bump=Signal(), rx_bump=Signal(),     # the consumer starts a frame on ch
            rx_changed=Signal())                    # an rx_next is written at this edge
        m.d.comb += [cmd_q.w_data.eq(net.cmd_w), done_q.w_data.eq(net.done_w)]
        self._scrub_engine(m, net)
        # A frame's info enters info_q through a holding register: the push decision (late:
        # the inbound IV verdict) then drives one register enable, not the FIFO's write
        # logic. info_q is read when the frame's IV leaves gcm_core, many cycles later.
        info_hold = Signal(info_layout, reset_less=True)
        hold_valid = Signal()
        m.d.comb += [info_q.w_data.eq(info_hold), info_q.w_en.eq(hold_valid),
                     net.info_room.eq(~hold_valid | info_q.w_rdy)]
        with m.If(info_q.w_rdy):
            m.d.sync += hold_valid.eq(0)
        with m.If(net.info_push):
            m.d.sync += [info_hold.eq(net.info_w), hold_valid.eq(1)]
        m.d.sync += [net.inflight.eq(net.inflight + net.inc_inflight - net.dec_inflight),
                     net.slots_used.eq(net.slots_used + net.alloc_slot - net.free_slot)]
        with m.If(net.alloc_slot):
            m.d.sync += net.slot_next.eq(net.slot_next + 1)

        self._issuer(m, net)
        self._consumer(m, net)
        self._key_port(m, net)
        self._output_stage(m, net)
        self._commit(m, net)
        return m

    # ---- reset scrub: zero every staging word -------------------------------------------
    def _scrub_engine(self, m, net):
        """After reset (in a chip: ``rst | flr`` of cc_ctrl) the staging buffer may hold
        decrypted plaintext of frames whose tag was never checked, or failed: a walk writes
        zero to one word per cycle, ``scrub_cycles`` cycles, while ``desc`` and ``key`` are
        refused (nothing can be in flight: reset emptied the pipeline). The key state
        (gcm_core's contexts, the IV counters, the key flags) is cleared in the reset cycle
        itself; the rest of the datapath registers have resets."""
        words = self.slots * self.frame_blocks
        net.scrubbing = Signal(init=1, name="scrubbing")
        net.scrub_addr = Signal((words - 1).bit_length(), name="scrub_addr")
        with m.If(net.scrubbing):
            m.d.sync += net.scrub_addr.eq(increment(m, net.scrub_addr, "scrub_inc"))
            with m.If(net.scrub_addr.all()):       # the last word (words is a power of two)
                m.d.sync += net.scrubbing.eq(0)

    # ---- issuer: check the descriptor, issue its reads ---------------------------------
    def _issuer(self, m, net):
        m.submodules.desc_check = chk = DescCheck(self.channels, self.frame_blocks, self.addr_bits)
        # no descriptor while the reset scrub runs
        m.d.comb += [chk.i.valid.eq(self.desc.valid & ~net.scrubbing),
                     chk.i.payload.eq(self.desc.payload),
                     self.desc.ready.eq(chk.i.ready & ~net.scrubbing)]
        c = chk.o.payload
        d = c.desc
        out = d.dir == Dir.OUT
        src_base = Mux(out, self.prot_base, self.bb_base)
        src_limit = Mux(out, self.prot_limit, self.bb_limit)
        dst_base = Mux(out, self.bb_base, self.prot_base)
        dst_limit = Mux(out, self.bb_limit, self.prot_limit)
        region_ok = wire(m, at_least(m, d.src, src_base, "src_lo") &
                         at_most(m, c.src_end, src_limit, "src_hi") &
                         at_least(m, d.dst, dst_base, "dst_lo") &
                         at_most(m, c.dst_end, dst_limit, "dst_hi"), "region_ok")
        code = Signal(Status)
        m.d.comb += code.eq(Mux((c.code == Status.OK) & ~region_ok, Status.REGION, c.code))

        rem = Signal(CNT_BITS)          # reads of the current descriptor still to issue
        raddr = Signal(self.addr_bits)
        idle = wire(m, rem == 0, "issuer_idle")
        take = chk.o.valid & chk.o.ready
        cw = net.cmd_w
        m.d.comb += [
            chk.o.ready.eq(net.cmd_q.w_rdy & (idle | ((rem == 1) & self.rd_req.ready))),
            self.rd_req.valid.eq(~idle),
            self.rd_req.payload.addr.eq(raddr),
            cw.dir.eq(d.dir), cw.ch.eq(d.ch), cw.len.eq(d.len), cw.dst.eq(d.dst),
            cw.sel.eq(Cat(*(d.ch == c for c in range(self.channels)))),
            cw.tag.eq(d.tag), cw.code.eq(code),
            net.cmd_q.w_en.eq(take),
        ]
        rem_dec, raddr_inc = decrement(m, rem, "rem_dec"), increment(m, raddr, "raddr_inc")
        with m.If(take):
            m.d.sync += [rem.eq(Mux(code == Status.OK, c.n_src, 0)), raddr.eq(d.src)]
        with m.Elif(self.rd_req.valid & self.rd_req.ready):
            m.d.sync += [rem.eq(rem_dec), raddr.eq(raddr_inc)]

    # ---- consumer: frames into gcm_core ---------------------------------------------------
    def _consumer(self, m, net):
        m.submodules.resp_stage = stage = RespStage(
            self.channels, _formal_mutant="replay_off_by_one" if self._formal_mutant == "replay_off_by_one" else None)
        # A read in flight at a reset may still be answered after it: while the scrub runs
        # rd_resp beats are taken and dropped, so none is held (it may be plaintext) or
        # taken for the first beat of the next frame.
        m.d.comb += [stage.i.valid.eq(self.rd_resp.valid & ~net.scrubbing),
                     stage.i.payload.eq(self.rd_resp.payload),
                     self.rd_resp.ready.eq(stage.i.ready | net.scrubbing)]
        m.d.comb += [stage.rx_next.eq(Cat(*net.rx_next)), stage.rx_changed.eq(net.rx_changed)]
        cmd, gin, gi, rd = net.cmd, net.gin, net.gin.payload, stage.o
        resp = rd.payload.data
        rx_iv = data.View(iv_layout, resp)
        # the head's channel state, selected by its one-hot (an AND-OR, no decoder)
        tx_cur = wire(m, _select(cmd.sel, net.tx_next), "tx_cur")
        key_here = wire(m, (cmd.sel & net.has_key).any(), "key_here")
        left = Signal(CNT_BITS)         # data blocks of the open frame still to send
        ndisc = Signal(CNT_BITS)        # reads of a refused frame still to discard
        tx_iv = Signal(iv_layout)
        m.d.comb += [tx_iv.ctr.eq(tx_cur), tx_iv.dir.eq(Dir.OUT.value), tx_iv.ch.eq(cmd.ch),
                     tx_iv.tail.eq(IV_TAIL)]
        m.d.comb += [gi.ctx.eq(cmd.ch), gi.decrypt.eq(cmd.dir == Dir.IN)]
        iw = net.info_w
        m.d.comb += [
            iw.dir.eq(cmd.dir), iw.dst.eq(cmd.dst), iw.tag.eq(cmd.tag),
            iw.len.eq(cmd.len), iw.slot.eq(net.slot_next),
            iw.ctr.eq(Mux(cmd.dir == Dir.OUT, tx_cur, rx_iv.ctr)),
        ]
        # log-depth arithmetic, built outside the FSM (its nets must not be conditional)
        net.tx_inc, net.rx_inc = increment(m, tx_cur, "tx_inc"), increment(m, rx_iv.ctr, "rx_inc")
        fmt_ok = wire(m, (cmd.sel & rd.payload.fmt_ok).any(), "fmt_ok")    # else BAD_IV
        new_ok = wire(m, (cmd.sel & rd.payload.new_ok).any(), "new_ok")    # else REPLAY
        len_plus1 = increment(m, Cat(cmd.len, Const(0, 1)), "len_plus1")
        left_dec, ndisc_dec = decrement(m, left, "left_dec"), decrement(m, ndisc, "ndisc_dec")

        # The frame-start decisions as flat nets. The inbound IV verdict is a select of
        # RespStage's per-channel flags (their compares ran a cycle ahead); a beat whose
        # flags may be stale (rx_next just written) waits a cycle.
        idle = Signal()
        head = wire(m, idle & net.cmd_q.r_rdy & ~self.key.valid & (cmd.code == Status.OK),
                    "head")                               # a key install goes first
        spent = wire(m, (cmd.sel & net.tx_spent).any(), "spent")
        out_head = wire(m, head & (cmd.dir == Dir.OUT) & key_here & ~spent, "out_head")
        # the bumped counter reaches CTR_LIMIT: compared before the increment, off its path
        net.tx_to_limit = wire(m, tx_cur == CTR_LIMIT - 1, "tx_to_limit")
        in_head = wire(m, head & (cmd.dir == Dir.IN) & rd.valid & stage.fresh, "in_head")
        in_room = wire(m, net.info_room & (net.slots_used != self.slots), "in_room")
        bad = Signal(Status)                              # the inbound IV block's verdict
        with m.If(~key_here):
            m.d.comb += bad.eq(Status.NO_KEY)
        with m.Elif(~fmt_ok):
            m.d.comb += bad.eq(Status.BAD_IV)
        with m.Elif(~new_ok):
            m.d.comb += bad.eq(Status.REPLAY)
        with m.Else():
            m.d.comb += bad.eq(Status.OK)
        iv_ok = wire(m, key_here & fmt_ok & new_ok, "iv_ok")
        out_start = wire(m, out_head & net.info_room & gin.ready, "out_start")
        in_start = wire(m, in_head & in_room & gin.ready & iv_ok, "in_start")
        in_refuse = wire(m, in_head & ~iv_ok, "in_refuse")
        m.d.comb += [net.tx_bump.eq(out_start), net.rx_bump.eq(in_start),
                     net.info_push.eq(out_start | in_start),
                     net.inc_inflight.eq(out_start | in_start), net.alloc_slot.eq(in_start)]
        with m.If(out_start | in_start):
            m.d.sync += left.eq(cmd.len)

        with m.FSM(name="consumer"):
            with m.State("IDLE"):
                m.d.comb += [idle.eq(1), net.key_ok.eq(net.inflight == 0)]
                with m.If(head & (cmd.dir == Dir.OUT)):
                    m.d.comb += [gin.valid.eq(out_head & net.info_room), gi.op.eq(Op.IV),
                                 gi.block.eq(tx_iv)]
                with m.Else():
                    m.d.comb += [gin.valid.eq(in_head & in_room & iv_ok), gi.op.eq(Op.IV),
                                 gi.block.eq(resp), rd.ready.eq(in_refuse | in_start)]
                with m.If(out_start | in_start):
                    m.next = "DATA"
                with m.If(idle & net.cmd_q.r_rdy & ~self.key.valid):
                    with m.If(cmd.code != Status.OK):
                        m.d.sync += [net.cur_code.eq(cmd.code), net.cur_ctr.eq(0)]
                        m.next = "DRAIN"
                    with m.Elif(cmd.dir == Dir.OUT):
                        with m.If(~key_here):
                            m.d.sync += [net.cur_code.eq(Status.NO_KEY), net.cur_ctr.eq(0),
                                         ndisc.eq(cmd.len)]
                            m.next = "DISCARD"
                        with m.Elif(spent):
                            m.d.sync += [net.cur_code.eq(Status.IV_EXHAUSTED),
                                         net.cur_ctr.eq(CTR_LIMIT), ndisc.eq(cmd.len)]
                            m.next = "DISCARD"
                with m.If(in_refuse):
                    m.d.sync += [net.cur_code.eq(bad), net.cur_ctr.eq(rx_iv.ctr),
                                 ndisc.eq(len_plus1)]
                    m.next = "DISCARD"
            # DATA and MAC test their own valid, not gin.valid (which also carries IDLE's
            # late verdict as a mux input)
            with m.State("DATA"):
                m.d.comb += [gin.valid.eq(rd.valid), gi.op.eq(Op.DATA),
                             gi.block.eq(resp), rd.ready.eq(gin.ready)]
                with m.If(rd.valid & gin.ready):
                    m.d.sync += left.eq(left_dec)
                    with m.If(left == 1):
                        m.next = "MAC"
            with m.State("MAC"):
                m.d.comb += gi.op.eq(Op.MAC)
                mac_valid = (cmd.dir == Dir.OUT) | rd.valid
                m.d.comb += gin.valid.eq(mac_valid)
                with m.If(cmd.dir == Dir.OUT):
                    m.d.comb += gi.block.eq(0)
                with m.Else():
                    m.d.comb += [gi.block.eq(resp), rd.ready.eq(gin.ready)]
                with m.If(mac_valid & gin.ready):
                    m.d.comb += net.cmd_q.r_en.eq(1)
                    m.next = "IDLE"
            with m.State("DISCARD"):
                with m.If(ndisc == 0):
                    m.next = "DRAIN"
                with m.Else():
                    m.d.comb += rd.ready.eq(1)
                    with m.If(rd.valid):
                        m.d.sync += ndisc.eq(ndisc_dec)
            with m.State("DRAIN"):
                with m.If((net.inflight == 0) & net.done_q.w_rdy):
                    m.d.comb += [net.drain_push.eq(1), net.cmd_q.r_en.eq(1)]
                    m.next = "IDLE"

    # ---- key port and per-channel state -----------------------------------------------------
    def _key_port(self, m, net):
        """Keys only between frames, nothing in flight. Each channel's counters are written
        by one flat enable (install or the consumer's bump), not by nested conditions."""
        kp, gk = self.key.payload, net.gcm.key
        key_ok = wire(m, net.key_ok & ~net.scrubbing, "key_open")  # no key while scrubbing
        m.d.comb += [
            gk.valid.eq(self.key.valid & key_ok),
            gk.payload.ctx.eq(kp.ch),
            gk.payload.key.eq(kp.key),
            self.key.ready.eq(gk.ready & key_ok),
        ]
        install = wire(m, self.key.valid & self.key.ready, "install")
        iv_spent = wire(m, kp.iv == CTR_LIMIT, "iv_spent")
        m.d.comb += net.rx_changed.eq(install | net.rx_bump)
        for c in range(self.channels):
            inst = wire(m, install & (kp.ch == c), f"install{c}")
            mine = net.cmd.sel[c]
            with m.If(inst):
                m.d.sync += net.has_key[c].eq(1)
            tx_write = inst if self._formal_mutant == "tx_not_advanced" else inst | (net.tx_bump & mine)
            to_limit = Const(0) if self._formal_mutant == "ctr_wraps" else net.tx_to_limit
            with m.If(tx_write):
                m.d.sync += [net.tx_next[c].eq(Mux(inst, kp.iv, net.tx_inc)),
                             net.tx_spent[c].eq(Mux(inst, iv_spent, to_limit))]
            with m.If(inst | (net.rx_bump & mine)):
                m.d.sync += net.rx_next[c].eq(Mux(inst, kp.iv, net.rx_inc))

    # ---- output stage: gcm_core.o → bounce writes / staging / completions ------------------
    def _output_stage(self, m, net):
        fb_bits, slot_bits = (self.frame_blocks - 1).bit_length(), (self.slots - 1).bit_length()
        o, info = net.gout, net.info
        go_ = o.payload
        o_iv, o_data, o_mac = go_.op == Op.IV, go_.op == Op.DATA, go_.op == Op.MAC
        oaddr = Signal(self.addr_bits)      # next bounce-buffer address of an OUT frame
        dcount = Signal(fb_bits + 1)        # data blocks of the frame seen so far
        err_acc = Signal()
        out_dir = info.dir == Dir.OUT
        mac_room = ~o_mac | (net.done_q.w_rdy & ~net.drain_push)
        m.d.comb += o.ready.eq((~out_dir | (~net.commit_owns & self.wr.ready)) & mac_room)
        o_take = o.valid & o.ready
        waddr = wire(m, Mux(o_iv, info.dst, oaddr), "waddr")
        # no commit owns wr: the OUT frame's blocks go to the bounce buffer
        to_wr = (out_dir | o_data) if self._formal_mutant == "commit_before_tag" else out_dir
        net.out_wr = (o.valid & to_wr & mac_room, waddr, go_.block)

        m.submodules.staging = staging = Memory(shape=BLOCK_BITS, depth=self.slots * self.frame_blocks,
                                                init=[])
        net.staging_r = staging.read_port()
        st_w = staging.write_port()
        # the reset scrub owns the write port while it runs (no frame is in flight then)
        m.d.comb += [
            st_w.addr.eq(Mux(net.scrubbing, net.scrub_addr,
                             Cat(dcount[:fb_bits], info.slot[:slot_bits]) if fb_bits else info.slot)),
            st_w.data.eq(Mux(net.scrubbing, 0, go_.block)),
            st_w.en.eq(net.scrubbing | (o_take & ~out_dir & o_data)),
        ]
        oaddr_inc, dcount_inc = increment(m, waddr, "oaddr_inc"), increment(m, dcount, "dcount_inc")
        with m.If(o_take & (o_iv | o_data)):
            m.d.sync += oaddr.eq(oaddr_inc)
        with m.If(o_take):
            with m.If(o_iv):
                m.d.sync += [dcount.eq(0), err_acc.eq(go_.err)]
            with m.Elif(o_data):
                m.d.sync += [dcount.eq(dcount_inc),
                             err_acc.eq(err_acc | go_.err)]
            with m.Elif(o_mac):
                m.d.sync += err_acc.eq(0)
        mac_code = Signal(Status)
        with m.If(err_acc | go_.err):
            m.d.comb += mac_code.eq(Status.ENGINE)
        with m.Elif(~out_dir & ~go_.tag_ok):
            m.d.comb += mac_code.eq(Status.AUTH)
        with m.Else():
            m.d.comb += mac_code.eq(Status.OK)
        mac_push = o_take & o_mac
        dw, cmd = net.done_w, net.cmd
        m.d.comb += [net.info_q.r_en.eq(mac_push), net.dec_inflight.eq(mac_push)]
        with m.If(net.drain_push):
            m.d.comb += [dw.tag.eq(cmd.tag), dw.code.eq(net.cur_code), dw.ctr.eq(net.cur_ctr)]
        with m.Else():
            m.d.comb += [dw.tag.eq(info.tag), dw.code.eq(mac_code), dw.ctr.eq(info.ctr),
                         dw.commit.eq(~out_dir & ((mac_code != Status.ENGINE)
                                                  if self._formal_mutant == "commit_on_tag_fail"
                                                  else (mac_code == Status.OK))),
                         dw.free_slot.eq(~out_dir), dw.slot.eq(info.slot),
                         dw.dst.eq(info.dst), dw.len.eq(info.len)]
        m.d.comb += net.done_q.w_en.eq(net.drain_push | mac_push)

    # ---- commit: staging slot → protected memory, then the status ---------------------------
    def _commit(self, m, net):
        fb_bits, slot_bits = (self.frame_blocks - 1).bit_length(), (self.slots - 1).bit_length()
        done, st_r = net.done, net.staging_r
        ck = Signal(CNT_BITS)           # next staging block to read
        wk = Signal(CNT_BITS)           # blocks written to protected memory
        cv = Signal()                   # st_r.data holds block wk
        caddr = Signal(self.addr_bits)  # done.dst + wk once the first block is written
        committing = net.done_q.r_rdy & done.commit
        # blocks the commit writes: the frame's length
        n_commit = (done.len - 1)[:LEN_BITS] if self._formal_mutant == "commit_one_short" else done.len
        m.d.comb += net.commit_owns.eq(committing & (wk != n_commit))
        c_wr_take = cv & self.wr.ready & net.commit_owns
        advance = ~cv | self.wr.ready
        # while the scrub runs the read port re-reads word 0, zeroed in the scrub's first
        # cycle: its data register (no reset) lets go of the last word it read
        m.d.comb += st_r.addr.eq(Mux(net.scrubbing, 0,
                                     Cat(ck[:fb_bits], done.slot[:slot_bits]) if fb_bits else done.slot))
        m.d.comb += st_r.en.eq(net.scrubbing)
        ck_inc, wk_inc = increment(m, ck, "ck_inc"), increment(m, wk, "wk_inc")
        c_addr = wire(m, Mux(wk == 0, done.dst, caddr), "c_addr")
        caddr_inc = increment(m, c_addr, "caddr_inc")
        with m.If(net.commit_owns & advance):
            with m.If(ck != done.len):
                if self._formal_mutant != "commit_stale_word":
                    m.d.comb += st_r.en.eq(1)
                m.d.sync += [ck.eq(ck_inc), cv.eq(1)]
            with m.Else():
                m.d.sync += cv.eq(0)
        with m.If(c_wr_take):
            m.d.sync += [wk.eq(wk_inc),
                         caddr.eq(c_addr if self._formal_mutant == "commit_addr_fixed" else caddr_inc)]

        out_valid, out_addr, out_data = net.out_wr
        with m.If(net.commit_owns):
            m.d.comb += [self.wr.valid.eq(cv), self.wr.payload.addr.eq(c_addr),
                         self.wr.payload.data.eq(st_r.data)]
        with m.Else():
            m.d.comb += [self.wr.valid.eq(out_valid), self.wr.payload.addr.eq(out_addr),
                         self.wr.payload.data.eq(out_data)]

        status_ok = net.done_q.r_rdy & (~done.commit | (wk == n_commit))
        m.d.comb += [
            self.status.valid.eq(status_ok),
            self.status.payload.tag.eq(done.tag),
            self.status.payload.code.eq(done.code),
            self.status.payload.ctr.eq(done.ctr),
        ]
        status_take = self.status.valid & self.status.ready
        m.d.comb += [net.done_q.r_en.eq(status_take), net.free_slot.eq(status_take & done.free_slot)]
        with m.If(status_take):
            m.d.sync += [ck.eq(0), wk.eq(0), cv.eq(0)]
