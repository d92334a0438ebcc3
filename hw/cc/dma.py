"""``CCDma`` (design ``cc_dma``): the H100-style encrypting DMA engine between protected
device memory and a shared bounce buffer, built on one :class:`~hw.gcm.GcmCore`.

One descriptor is one frame. ``OUT`` (device → host) reads ``len`` blocks of protected
memory and writes ``IV ‖ ciphertext ‖ tag`` (``len + 2`` blocks) to the bounce buffer;
``IN`` (host → device) reads such a frame from the bounce buffer, decrypts and
authenticates it into an on-chip staging slot and copies the plaintext to protected
memory only once the tag has matched.

Datapath (one block per cycle; every box honours back-pressure)::

    desc ─ issuer ─ rd_req          rd_resp ─ consumer ─ gcm_core.i   gcm_core.o ─ output ─┬ wr (OUT frames)
             │ (checks regions,           ▲  (IV counter, replay,       (contexts =   stage ├ staging (IN data)
             └── cmd FIFO ─────────────────┘   slots, key priority)      channels)          └ completion FIFO ─ commit ─ wr, status

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

Parameters: *channels* (1..16 gcm_core contexts; default 4 to keep the build small),
*frame_blocks* (largest frame, data blocks, a power of two), *slots* (staging slots, a
power of two ≥ 2: with 4 the commit of one frame overlaps the decryption of the next
three), *addr_bits* (block address width). The regions ``prot_base``/``prot_limit``
(protected memory) and ``bb_base``/``bb_limit`` (bounce buffer) are inputs: block
addresses, [base, limit), set by the trusted side.
"""
from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from hw.gcm import GcmCore, Op

from .layout import (BLOCK_BITS, CTR_BITS, CTR_LIMIT, CTX_BITS, DESC_TAG_BITS, IV_TAIL,
                     LEN_BITS, Dir, Status, desc_layout, dma_key_layout, iv_layout,
                     rd_req_layout, rd_resp_layout, status_layout, wr_layout)

__all__ = ["CCDma"]


def _pow2(v):
    return isinstance(v, int) and not isinstance(v, bool) and v >= 1 and v & (v - 1) == 0


class CCDma(wiring.Component):
    """Encrypting bounce-buffer DMA (see the module docstring).

    Ports: ``desc`` In stream (:func:`~hw.cc.layout.desc_layout`), ``status`` Out stream
    (:data:`~hw.cc.layout.status_layout`), ``key`` In stream
    (:data:`~hw.cc.layout.dma_key_layout`), ``rd_req`` Out / ``rd_resp`` In / ``wr`` Out
    streams to device memory, region inputs ``prot_base``, ``prot_limit``, ``bb_base``,
    ``bb_limit``.
    """

    def __init__(self, channels=4, *, frame_blocks=64, slots=4, addr_bits=32, karatsuba=4):
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
        ab, fb, nch = self.addr_bits, self.frame_blocks, self.channels
        fb_bits, slot_bits = (fb - 1).bit_length(), (self.slots - 1).bit_length()
        cnt_bits = LEN_BITS + 1

        cmd_layout = data.StructLayout({
            "dir": Dir, "ch": CTX_BITS, "len": LEN_BITS, "dst": ab, "tag": DESC_TAG_BITS,
            "code": Status})
        info_layout = data.StructLayout({       # one per frame inside gcm_core
            "dir": Dir, "dst": ab, "tag": DESC_TAG_BITS, "ctr": CTR_BITS, "slot": max(1, slot_bits),
            "len": LEN_BITS})
        done_layout = data.StructLayout({       # one per finished descriptor, in order
            "tag": DESC_TAG_BITS, "code": Status, "ctr": CTR_BITS, "commit": 1,
            "free_slot": 1, "slot": max(1, slot_bits), "dst": ab, "len": LEN_BITS})
        m.submodules.cmd_q = cmd_q = fifo.SyncFIFO(width=cmd_layout.size, depth=4)
        m.submodules.info_q = info_q = fifo.SyncFIFO(width=info_layout.size, depth=8)
        m.submodules.done_q = done_q = fifo.SyncFIFO(width=done_layout.size, depth=8)
        cmd = data.View(cmd_layout, cmd_q.r_data)
        info = data.View(info_layout, info_q.r_data)
        done = data.View(done_layout, done_q.r_data)
        cmd_w, info_w, done_w = Signal(cmd_layout), Signal(info_layout), Signal(done_layout)
        m.d.comb += [cmd_q.w_data.eq(cmd_w), info_q.w_data.eq(info_w), done_q.w_data.eq(done_w)]

        # ---- per-channel state ----------------------------------------------------------
        has_key = Signal(nch)
        tx_next = Array(Signal(CTR_BITS, name=f"tx_next{c}") for c in range(nch))
        rx_next = Array(Signal(CTR_BITS, name=f"rx_next{c}") for c in range(nch))

        inflight = Signal(4)            # frames sent into gcm_core whose MAC has not come out
        inc_inflight, dec_inflight = Signal(), Signal()
        m.d.sync += inflight.eq(inflight + inc_inflight - dec_inflight)
        slots_used = Signal(slot_bits + 1)
        slot_next = Signal(max(1, slot_bits))
        alloc_slot, free_slot = Signal(), Signal()
        m.d.sync += slots_used.eq(slots_used + alloc_slot - free_slot)
        with m.If(alloc_slot):
            m.d.sync += slot_next.eq(slot_next + 1)

        # ---- issuer: check the descriptor, issue its reads -----------------------------
        d = self.desc.payload
        rem = Signal(cnt_bits)
        raddr = Signal(ab)

        def inside(addr, n, base, limit):
            return (addr >= base) & ((addr + n) <= limit)

        n_prot, n_bb = d.len, d.len + 2
        region_ok = Mux(d.dir == Dir.OUT,
                        inside(d.src, n_prot, self.prot_base, self.prot_limit) &
                        inside(d.dst, n_bb, self.bb_base, self.bb_limit),
                        inside(d.src, n_bb, self.bb_base, self.bb_limit) &
                        inside(d.dst, n_prot, self.prot_base, self.prot_limit))
        code = Signal(Status)
        with m.If(d.ch >= nch):
            m.d.comb += code.eq(Status.CHANNEL)
        with m.Elif((d.len == 0) | (d.len > fb)):
            m.d.comb += code.eq(Status.LENGTH)
        with m.Elif(~region_ok):
            m.d.comb += code.eq(Status.REGION)
        with m.Else():
            m.d.comb += code.eq(Status.OK)
        m.d.comb += [
            self.desc.ready.eq(cmd_q.w_rdy & ((rem == 0) | ((rem == 1) & self.rd_req.ready))),
            self.rd_req.valid.eq(rem != 0),
            self.rd_req.payload.addr.eq(raddr),
            cmd_w.dir.eq(d.dir), cmd_w.ch.eq(d.ch), cmd_w.len.eq(d.len), cmd_w.dst.eq(d.dst),
            cmd_w.tag.eq(d.tag), cmd_w.code.eq(code),
        ]
        desc_take = self.desc.valid & self.desc.ready
        m.d.comb += cmd_q.w_en.eq(desc_take)
        with m.If(desc_take):
            m.d.sync += [rem.eq(Mux(code == Status.OK, Mux(d.dir == Dir.OUT, n_prot, n_bb), 0)),
                         raddr.eq(d.src)]
        with m.Elif(self.rd_req.valid & self.rd_req.ready):
            m.d.sync += [rem.eq(rem - 1), raddr.eq(raddr + 1)]

        # ---- consumer: frames into gcm_core ---------------------------------------------
        gi = gcm.i.payload
        resp = self.rd_resp.payload.data
        rx_iv = data.View(iv_layout, resp)
        ch = cmd.ch[:max(1, (nch - 1).bit_length())] if nch > 1 else Const(0, 1)
        cnt = Signal(cnt_bits)
        ndisc = Signal(cnt_bits)
        cur_code = Signal(Status)
        cur_ctr = Signal(CTR_BITS)
        key_pending = self.key.valid
        m.d.comb += [gi.ctx.eq(cmd.ch), gi.decrypt.eq(cmd.dir == Dir.IN)]
        tx_iv = Signal(iv_layout)
        m.d.comb += [tx_iv.ctr.eq(tx_next[ch]), tx_iv.dir.eq(Dir.OUT.value), tx_iv.ch.eq(cmd.ch),
                     tx_iv.tail.eq(IV_TAIL)]
        gi_take = gcm.i.valid & gcm.i.ready
        resp_take = self.rd_resp.valid & self.rd_resp.ready
        m.d.comb += [
            info_w.dir.eq(cmd.dir), info_w.dst.eq(cmd.dst), info_w.tag.eq(cmd.tag),
            info_w.len.eq(cmd.len), info_w.slot.eq(slot_next),
            info_w.ctr.eq(Mux(cmd.dir == Dir.OUT, tx_next[ch], rx_iv.ctr)),
        ]
        drain_push = Signal()
        key_ok = Signal()

        with m.FSM(name="consumer"):
            with m.State("IDLE"):
                m.d.comb += key_ok.eq(inflight == 0)
                with m.If(cmd_q.r_rdy & ~key_pending):
                    with m.If(cmd.code != Status.OK):
                        m.d.sync += [cur_code.eq(cmd.code), cur_ctr.eq(0)]
                        m.next = "DRAIN"
                    with m.Elif(cmd.dir == Dir.OUT):
                        with m.If(~has_key.bit_select(ch, 1)):
                            m.d.sync += [cur_code.eq(Status.NO_KEY), cur_ctr.eq(0),
                                         ndisc.eq(cmd.len)]
                            m.next = "DISCARD"
                        with m.Elif(tx_next[ch] == CTR_LIMIT):
                            m.d.sync += [cur_code.eq(Status.IV_EXHAUSTED), cur_ctr.eq(CTR_LIMIT),
                                         ndisc.eq(cmd.len)]
                            m.next = "DISCARD"
                        with m.Else():
                            m.d.comb += [gcm.i.valid.eq(info_q.w_rdy), gi.op.eq(Op.IV),
                                         gi.block.eq(tx_iv)]
                            with m.If(gi_take):
                                m.d.comb += [info_q.w_en.eq(1), inc_inflight.eq(1)]
                                m.d.sync += [tx_next[ch].eq(tx_next[ch] + 1), cnt.eq(0)]
                                m.next = "DATA"
                    with m.Elif(self.rd_resp.valid):          # IN: the IV block is here
                        bad = Signal(Status)
                        with m.If(~has_key.bit_select(ch, 1)):
                            m.d.comb += bad.eq(Status.NO_KEY)
                        with m.Elif((rx_iv.tail != IV_TAIL) | (rx_iv.zero != 0) |
                                    (rx_iv.dir != Dir.IN.value) | (rx_iv.ch != cmd.ch)):
                            m.d.comb += bad.eq(Status.BAD_IV)
                        with m.Elif((rx_iv.ctr < rx_next[ch]) | (rx_iv.ctr == CTR_LIMIT)):
                            m.d.comb += bad.eq(Status.REPLAY)
                        with m.Else():
                            m.d.comb += bad.eq(Status.OK)
                        with m.If(bad != Status.OK):
                            m.d.comb += self.rd_resp.ready.eq(1)
                            m.d.sync += [cur_code.eq(bad), cur_ctr.eq(rx_iv.ctr),
                                         ndisc.eq(cmd.len + 1)]
                            m.next = "DISCARD"
                        with m.Else():
                            go = info_q.w_rdy & (slots_used != self.slots)
                            m.d.comb += [gcm.i.valid.eq(go), gi.op.eq(Op.IV), gi.block.eq(resp),
                                         self.rd_resp.ready.eq(go & gcm.i.ready)]
                            with m.If(gi_take):
                                m.d.comb += [info_q.w_en.eq(1), inc_inflight.eq(1),
                                             alloc_slot.eq(1)]
                                m.d.sync += [rx_next[ch].eq(rx_iv.ctr + 1), cnt.eq(0)]
                                m.next = "DATA"
            with m.State("DATA"):
                m.d.comb += [gcm.i.valid.eq(self.rd_resp.valid), gi.op.eq(Op.DATA),
                             gi.block.eq(resp), self.rd_resp.ready.eq(gcm.i.ready)]
                with m.If(gi_take):
                    m.d.sync += cnt.eq(cnt + 1)
                    with m.If(cnt + 1 == cmd.len):
                        m.next = "MAC"
            with m.State("MAC"):
                m.d.comb += gi.op.eq(Op.MAC)
                with m.If(cmd.dir == Dir.OUT):
                    m.d.comb += [gcm.i.valid.eq(1), gi.block.eq(0)]
                with m.Else():
                    m.d.comb += [gcm.i.valid.eq(self.rd_resp.valid), gi.block.eq(resp),
                                 self.rd_resp.ready.eq(gcm.i.ready)]
                with m.If(gi_take):
                    m.d.comb += cmd_q.r_en.eq(1)
                    m.next = "IDLE"
            with m.State("DISCARD"):
                with m.If(ndisc == 0):
                    m.next = "DRAIN"
                with m.Else():
                    m.d.comb += self.rd_resp.ready.eq(1)
                    with m.If(resp_take):
                        m.d.sync += ndisc.eq(ndisc - 1)
            with m.State("DRAIN"):
                with m.If((inflight == 0) & done_q.w_rdy):
                    m.d.comb += [drain_push.eq(1), cmd_q.r_en.eq(1)]
                    m.next = "IDLE"

        # ---- key port: only between frames, nothing in flight ---------------------------
        kp = self.key.payload
        m.d.comb += [
            gcm.key.valid.eq(self.key.valid & key_ok),
            gcm.key.payload.ctx.eq(kp.ch),
            gcm.key.payload.key.eq(kp.key),
            self.key.ready.eq(gcm.key.ready & key_ok),
        ]
        with m.If(self.key.valid & self.key.ready & (kp.ch < nch)):
            kch = kp.ch[:max(1, (nch - 1).bit_length())] if nch > 1 else Const(0, 1)
            m.d.sync += [has_key.bit_select(kch, 1).eq(1), tx_next[kch].eq(kp.iv),
                         rx_next[kch].eq(kp.iv)]

        # ---- output stage: gcm_core.o → bounce writes / staging / completions -----------
        go_ = gcm.o.payload
        o_iv, o_data, o_mac = go_.op == Op.IV, go_.op == Op.DATA, go_.op == Op.MAC
        oaddr = Signal(ab)
        dcount = Signal(fb_bits + 1)
        err_acc = Signal()
        commit_owns = Signal()
        out_dir = info.dir == Dir.OUT
        need_wr = out_dir
        o_ok = (~need_wr | (~commit_owns & self.wr.ready)) & (~o_mac | (done_q.w_rdy & ~drain_push))
        m.d.comb += gcm.o.ready.eq(o_ok)
        o_take = gcm.o.valid & gcm.o.ready
        waddr = Mux(o_iv, info.dst, oaddr)

        m.submodules.staging = staging = Memory(shape=BLOCK_BITS, depth=self.slots * fb, init=[])
        st_w = staging.write_port()
        st_r = staging.read_port()
        m.d.comb += [
            st_w.addr.eq(Cat(dcount[:fb_bits], info.slot[:slot_bits]) if fb_bits else info.slot),
            st_w.data.eq(go_.block),
            st_w.en.eq(o_take & ~out_dir & o_data),
        ]
        with m.If(o_take):
            with m.If(o_iv):
                m.d.sync += [oaddr.eq(info.dst + 1), dcount.eq(0), err_acc.eq(go_.err)]
            with m.Elif(o_data):
                m.d.sync += [oaddr.eq(oaddr + 1), dcount.eq(dcount + 1),
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
        m.d.comb += [info_q.r_en.eq(mac_push), dec_inflight.eq(mac_push)]
        with m.If(drain_push):
            m.d.comb += [done_w.tag.eq(cmd.tag), done_w.code.eq(cur_code), done_w.ctr.eq(cur_ctr)]
        with m.Else():
            m.d.comb += [done_w.tag.eq(info.tag), done_w.code.eq(mac_code), done_w.ctr.eq(info.ctr),
                         done_w.commit.eq(~out_dir & (mac_code == Status.OK)),
                         done_w.free_slot.eq(~out_dir), done_w.slot.eq(info.slot),
                         done_w.dst.eq(info.dst), done_w.len.eq(info.len)]
        m.d.comb += done_q.w_en.eq(drain_push | mac_push)

        # ---- commit: staging slot → protected memory, then the status --------------------
        ck = Signal(cnt_bits)           # next staging block to read
        wk = Signal(cnt_bits)           # blocks written to protected memory
        cv = Signal()                   # st_r.data holds block wk
        committing = done_q.r_rdy & done.commit
        m.d.comb += commit_owns.eq(committing & (wk != done.len))
        c_wr_take = cv & self.wr.ready & commit_owns
        advance = ~cv | self.wr.ready
        m.d.comb += st_r.addr.eq(Cat(ck[:fb_bits], done.slot[:slot_bits]) if fb_bits else done.slot)
        m.d.comb += st_r.en.eq(0)
        with m.If(commit_owns & advance):
            with m.If(ck != done.len):
                m.d.comb += st_r.en.eq(1)
                m.d.sync += [ck.eq(ck + 1), cv.eq(1)]
            with m.Else():
                m.d.sync += cv.eq(0)
        with m.If(c_wr_take):
            m.d.sync += wk.eq(wk + 1)

        with m.If(commit_owns):
            m.d.comb += [self.wr.valid.eq(cv), self.wr.payload.addr.eq(done.dst + wk),
                         self.wr.payload.data.eq(st_r.data)]
        with m.Else():
            m.d.comb += [self.wr.valid.eq(gcm.o.valid & need_wr & (~o_mac | (done_q.w_rdy & ~drain_push))),
                         self.wr.payload.addr.eq(waddr), self.wr.payload.data.eq(go_.block)]

        status_ok = done_q.r_rdy & (~done.commit | (wk == done.len))
        m.d.comb += [
            self.status.valid.eq(status_ok),
            self.status.payload.tag.eq(done.tag),
            self.status.payload.code.eq(done.code),
            self.status.payload.ctr.eq(done.ctr),
        ]
        status_take = self.status.valid & self.status.ready
        m.d.comb += [done_q.r_en.eq(status_take), free_slot.eq(status_take & done.free_slot)]
        with m.If(status_take):
            m.d.sync += [ck.eq(0), wk.eq(0), cv.eq(0)]
        return m
