"""``GpuCC`` (design ``gpu_cc``): the H100-style confidential GPU top — ``cc_ctrl`` (mode,
reset scrub, BAR0 decoupler, firewall, device memory) and ``cc_dma`` (encrypting
bounce-buffer DMA) in one design, sharing the device memory (docs/cc.md, ``gpu_cc``).

::

    host CSR ──────────────────────────────► cc_ctrl.host (decoupler)
    fw CSR ── 0xC0..0xCB: DMA key block ───► key install ─► cc_dma.key   (CC on / devtools only)
           └─ the rest ────────────────────► cc_ctrl.fw
    desc ─► CC off: PlainCopy  │ CC on / devtools: cc_dma ─► status
            rd_req / wr: block address bit addr_bits-1 set ─► rd_req/rd_resp/wr (host memory, PCIe)
                                                  clear ─► arbiter ─► cc_ctrl.mem_req (src DMA)
    mem_req/mem_resp (host BAR1 / engines) ─────► arbiter (lowest priority; src DMA demoted to 3)

Decisions (the H100 source: in CC on the DMA is the only engine that may write out of the
compute-protected region, and only encrypted; in CC off the hypervisor has full access and
the GPU is an ordinary device; session keys are set up by the driver in the CVM over SPDM
with the GPU's firmware):

- **The mode picks the engine.** The active mode (``cc_ctrl.mode``, changed only by an FLR,
  which also resets everything here) routes ``desc``: CC off → :class:`PlainCopy` (the
  copy an ordinary GPU does, no bounce-buffer format); CC on / devtools → ``cc_dma`` (IV ‖
  ciphertext ‖ tag frames). So no descriptor can move plaintext out of the protected
  region in CC on: the plain engine cannot be reached.
- **Keys only over the trusted port, and only in CC on / devtools.** The firmware writes
  the key into ``cc_ctrl``'s ``KEY0..7`` and starts an install with ``DMA_KEY_CTRL`` (a
  small register block on the ``fw`` port only: the host's bus goes to ``cc_ctrl``,
  whose decoupler refuses those addresses in every mode). In CC off the BAR0 is open to
  the host (it may write ``KEY0..7``), so the DMA **refuses every install in CC off**
  (``DMA_KEY_STATUS.refused``): no key the host could have chosen ever reaches the engine.
- **FLR resets and scrubs the DMA side.** ``cc_dma``, the plain engine, the key block and
  the routing run in a clock domain ``dma`` (the same clock) whose reset is ``rst | flr`` (``cc_dma``'s
  reset is its FLR — keys, IV counters, pipeline registers clear, then its staging buffer is
  zeroed word by word). The routing's response queue (it can hold protected data) is made
  of resettable registers, not a memory, for the same reason.
- **Host memory is the bounce buffer.** Block addresses with bit ``addr_bits - 1`` set
  (:attr:`GpuCC.host_base` and up) are system memory over PCIe (``rd_req``/``rd_resp``/``wr``,
  the testbench's); below it is the device memory of ``cc_ctrl``. The protected region of
  ``cc_dma`` is ``cc_ctrl``'s (``[0, protected)``): one definition of the CPR. The bounce
  window ``bb_base``/``bb_limit`` is an input set by the trusted side, as on ``cc_dma``.
- **Device memory arbitration.** ``cc_ctrl`` has one memory port (one access per cycle,
  one response register): DMA writes first, then DMA reads, then the external
  ``mem_req``. A DMA read is issued only with room for its answer in the response queue,
  so ``cc_ctrl``'s response register never waits on ``cc_dma`` (a stalled engine could
  otherwise block its own commit writes behind its read answers). The external port may
  not claim to be the DMA: its ``src`` = DMA becomes code 3 (host rules).

Parameters: *depth*, *protected* (``cc_ctrl``), *channels*, *frame_blocks*, *slots*,
*addr_bits* (``cc_dma``). Invalid values raise as the blocks' constructors do; *addr_bits*
must leave the device memory below the host window.
"""
from amaranth.hdl import (
    Array,
    Cat,
    ClockDomain,
    ClockSignal,
    Const,
    DomainRenamer,
    Module,
    Mux,
    ResetSignal,
    Signal,
    Value,
)
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from hw.common import SkidBuffer, add, at_least, at_most, decrement, increment, wire
from hw.csr import Signature
from hw.rts import MeasurementStore
from hw.rts.layout import OWNER_BITS
from hw.rts.layout import Status as RtsStatus

from .ctrl import CCCtrl
from .dma import CCDma
from .layout import (
    BLOCK_BITS,
    CTR_BITS,
    CTX_BITS,
    DESC_TAG_BITS,
    LEN_BITS,
    Dir,
    Mode,
    Src,
    Status,
    desc_layout,
    mem_req_layout,
    mem_resp_layout,
    rd_req_layout,
    rd_resp_layout,
    status_layout,
    wr_layout,
)
from .regs import (
    ADDR_WIDTH,
    DMA_KEY_CTRL,
    DMA_KEY_GO,
    DMA_KEY_IV,
    DMA_KEY_STATUS,
    GPU_READY,
    RTS_COUNT,
    RTS_CTRL,
    RTS_DATA,
    RTS_EXTEND,
    RTS_READ,
    RTS_REFUSED,
    RTS_SLOTS,
    RTS_STATUS,
    RTS_WORDS,
    gpu_register_map,
    register_map,
)

__all__ = ["GpuCC", "PlainCopy"]

# gpu_cc's own registers beside cc_ctrl's map (hw/cc/regs.py: gpu_register_map): the DMA
# key block and the RTS window on the firmware port, GPU_READY on both ports. Their
# addresses are not in ALLOW, so a host access to any but GPU_READY reaches cc_ctrl's
# decoupler and is refused there (counted in DEC_COUNT).
GPU_REGS = gpu_register_map()
assert not {r.addr for r in GPU_REGS} & {r.addr for r in register_map()}


def _read_word(name, **fields):
    """The read word of ``gpu_cc``'s register *name*, every field of the map at its offset
    (hw/cc/regs.py: the one layout RTL, testbench and docs read)."""
    parts, at = [], 0
    for f in GPU_REGS[name].fields:
        v = Value.cast(fields.pop(f.name))
        assert len(v) <= f.width, f"{name}.{f.name}: {len(v)} bits in a {f.width}-bit field"
        parts += [Const(0, f.offset - at), v, Const(0, f.width - len(v))]
        at = f.offset + f.width
    assert not fields, f"{name} has no fields {sorted(fields)}"
    return Cat(*parts)


class PlainCopy(wiring.Component):
    """The CC-off DMA: copies ``len`` blocks from ``src`` to ``dst`` as they are (an
    ordinary GPU's copy engine). Same descriptor and status streams as ``cc_dma``
    (``ch`` is ignored; ``ctr`` is 0). Checks: ``LENGTH`` (len = 0), ``REGION`` (OUT: src
    range in ``[prot_base, prot_limit)`` and dst range in ``[bb_base, bb_limit)``; IN the
    reverse), one register stage after ``desc`` (a skid buffer). Reads run ahead of the
    writes (a 4-entry command queue); the writer spends
    one cycle per descriptor on its status, which is pushed the cycle after the last
    write was accepted (a status means the data is there). Holds no secret in any mode it
    runs in (CC off), so nothing of it needs a scrub."""

    def __init__(self, addr_bits=32):
        if isinstance(addr_bits, bool) or not isinstance(addr_bits, int) or not 8 <= addr_bits <= 48:
            raise ValueError(f"addr_bits must be an int in 8..48, not {addr_bits!r}")
        self.addr_bits = addr_bits
        super().__init__({
            "desc": In(stream.Signature(desc_layout(addr_bits))),
            "status": Out(stream.Signature(status_layout)),
            "rd_req": Out(stream.Signature(rd_req_layout(addr_bits))),
            "rd_resp": In(stream.Signature(rd_resp_layout)),
            "wr": Out(stream.Signature(wr_layout(addr_bits))),
            "prot_base": In(addr_bits), "prot_limit": In(addr_bits),
            "bb_base": In(addr_bits), "bb_limit": In(addr_bits),
        })

    def elaborate(self, platform):
        m = Module()
        ab = self.addr_bits
        cmd_layout = data.StructLayout({"dst": ab, "len": LEN_BITS, "tag": DESC_TAG_BITS,
                                        "code": Status})
        m.submodules.cmd_q = cmd_q = fifo.SyncFIFOBuffered(width=cmd_layout.size, depth=4)
        m.submodules.done_q = done_q = fifo.SyncFIFOBuffered(width=status_layout.size, depth=2)

        # ---- check stage: the descriptor and its end addresses in a skid buffer, so the
        # region compares start from a register (desc → add → compare → rem measured 32
        # gate levels in gpu_cc). Log-depth adders and compares (hw.common): a plain + or
        # >= is a ripple chain.
        staged = data.StructLayout({"desc": desc_layout(ab), "src_end": ab + 1, "dst_end": ab + 1})
        m.submodules.check = check = SkidBuffer(staged)
        din = self.desc.payload
        m.d.comb += [
            check.i.valid.eq(self.desc.valid), self.desc.ready.eq(check.i.ready),
            check.i.payload.desc.eq(din),
            check.i.payload.src_end.eq(add(m, din.src, din.len, ab + 1, "src_end")),
            check.i.payload.dst_end.eq(add(m, din.dst, din.len, ab + 1, "dst_end")),
        ]

        # ---- issuer: checks, command queue, reads --------------------------------------
        desc = check.o
        d = desc.payload.desc
        src_end, dst_end = desc.payload.src_end, desc.payload.dst_end

        def inside(a, end, base, limit, name):
            return at_least(m, a, base, f"{name}_lo") & at_most(m, end, limit, f"{name}_hi")

        in_prot_src = inside(d.src, src_end, self.prot_base, self.prot_limit, "prot_src")
        in_bb_dst = inside(d.dst, dst_end, self.bb_base, self.bb_limit, "bb_dst")
        in_bb_src = inside(d.src, src_end, self.bb_base, self.bb_limit, "bb_src")
        in_prot_dst = inside(d.dst, dst_end, self.prot_base, self.prot_limit, "prot_dst")
        region_ok = Mux(d.dir == Dir.OUT, in_prot_src & in_bb_dst, in_bb_src & in_prot_dst)
        code = Signal(Status)
        with m.If(d.len == 0):
            m.d.comb += code.eq(Status.LENGTH)
        with m.Elif(~region_ok):
            m.d.comb += code.eq(Status.REGION)
        with m.Else():
            m.d.comb += code.eq(Status.OK)
        rem = Signal(LEN_BITS)
        raddr = Signal(ab)
        idle = rem == 0
        cw = data.View(cmd_layout, cmd_q.w_data)
        m.d.comb += [
            desc.ready.eq(cmd_q.w_rdy & (idle | ((rem == 1) & self.rd_req.ready))),
            cw.dst.eq(d.dst), cw.len.eq(d.len), cw.tag.eq(d.tag), cw.code.eq(code),
            cmd_q.w_en.eq(desc.valid & desc.ready),
            self.rd_req.valid.eq(~idle), self.rd_req.payload.addr.eq(raddr),
        ]
        # (the arithmetic is built outside the If: its nets must not be conditional)
        rem_dec, raddr_inc = decrement(m, rem, "rem_dec"), increment(m, raddr, "raddr_inc")
        with m.If(desc.valid & desc.ready):
            m.d.sync += [rem.eq(Mux(code == Status.OK, d.len, 0)), raddr.eq(d.src)]
        with m.Elif(self.rd_req.valid & self.rd_req.ready):
            m.d.sync += [rem.eq(rem_dec), raddr.eq(raddr_inc)]

        # ---- writer: read data to dst, then the status --------------------------------
        head = data.View(cmd_layout, cmd_q.r_data)
        wk = Signal(LEN_BITS)           # blocks of the head written
        waddr = Signal(ab)              # dst + wk once the first block is written
        ok = head.code == Status.OK
        beat = cmd_q.r_rdy & ok & (wk != head.len)
        addr = wire(m, Mux(wk == 0, head.dst, waddr), "waddr_now")
        wk_inc, waddr_inc = increment(m, wk, "wk_inc"), increment(m, addr, "waddr_inc")
        m.d.comb += [
            self.wr.valid.eq(beat & self.rd_resp.valid),
            self.wr.payload.addr.eq(addr), self.wr.payload.data.eq(self.rd_resp.payload.data),
            self.rd_resp.ready.eq(beat & self.wr.ready),
        ]
        with m.If(self.wr.valid & self.wr.ready):
            m.d.sync += [wk.eq(wk_inc), waddr.eq(waddr_inc)]
        finish = cmd_q.r_rdy & (~ok | (wk == head.len)) & done_q.w_rdy
        dw = data.View(status_layout, done_q.w_data)
        m.d.comb += [dw.tag.eq(head.tag), dw.code.eq(head.code), dw.ctr.eq(0),
                     done_q.w_en.eq(finish), cmd_q.r_en.eq(finish)]
        with m.If(finish):
            m.d.sync += wk.eq(0)
        m.d.comb += [self.status.valid.eq(done_q.r_rdy), self.status.payload.eq(done_q.r_data),
                     done_q.r_en.eq(self.status.ready)]
        return m


class _RegQueue(wiring.Component):
    """A small FIFO of flip-flops with reset (a ``lib.memory`` FIFO keeps its words over a
    reset: this one holds protected data read for the DMA, which an FLR must clear)."""

    def __init__(self, width, depth):
        self.width, self.depth = width, depth
        super().__init__({
            "w_data": In(width), "w_en": In(1),
            "r_data": Out(width), "r_en": In(1), "r_rdy": Out(1),
            "level": Out(range(depth + 1)),
        })

    def elaborate(self, platform):
        m = Module()
        words = Array(Signal(self.width, name=f"word{k}") for k in range(self.depth))
        wp, rp = Signal(range(self.depth)), Signal(range(self.depth))
        level = Signal(range(self.depth + 1))
        m.d.comb += [self.r_data.eq(words[rp]), self.r_rdy.eq(level != 0), self.level.eq(level)]
        push, pop = self.w_en, self.r_en & (level != 0)
        with m.If(push):
            m.d.sync += [words[wp].eq(self.w_data),
                         wp.eq(Mux(wp == self.depth - 1, 0, wp + 1))]
        with m.If(pop):
            m.d.sync += rp.eq(Mux(rp == self.depth - 1, 0, rp + 1))
        m.d.sync += level.eq(level + push - pop)
        return m


class GpuCC(wiring.Component):
    """``cc_ctrl`` + ``cc_dma`` (+ the CC-off plain copy engine) sharing the device memory
    (see the module docstring).

    Ports: ``mode_nv`` In, ``flr`` In, ``mode``, ``mode_store``, ``ready``, ``fault`` Out
    (``cc_ctrl``'s); ``host`` and ``fw`` CSR buses (``fw`` adds the DMA key block);
    ``mem_req`` In / ``mem_resp`` Out (device memory for the host's BAR1 and the other
    engines, ``cc_ctrl``'s layout); ``desc`` In / ``status`` Out (DMA descriptors, the
    layouts of ``cc_dma``); ``rd_req`` Out / ``rd_resp`` In / ``wr`` Out (host system
    memory, block addresses ≥ :attr:`host_base`); ``bb_base``/``bb_limit`` In (the bounce
    window, block addresses in host memory, set by the trusted side).

    Attributes: ``host_base`` (first host-memory block address), ``ctrl_scrub_cycles``
    (``ready`` low after an FLR), ``dma_scrub_cycles`` (``cc_dma``'s staging walk),
    ``scrub_cycles`` (the larger: ``desc`` is refused that long after an FLR in CC on).
    """

    RESP_DEPTH = 4      # device read answers the DMA may have outstanding (full rate needs 3)
    ROUTE_DEPTH = 16    # DMA reads in flight across device and host memory

    def __init__(self, depth=256, protected=None, *, channels=4, frame_blocks=64, slots=4,
                 addr_bits=32):
        self._ctrl = CCCtrl(depth, protected)
        self._dma = CCDma(channels, frame_blocks=frame_blocks, slots=slots, addr_bits=addr_bits)
        if (1 << (addr_bits - 1)) < depth:
            raise ValueError(f"addr_bits = {addr_bits} leaves no room for {depth} device words "
                             f"below the host window")
        self._copy = PlainCopy(addr_bits)
        self._rts = MeasurementStore(RTS_SLOTS, OWNER_BITS)
        self.depth, self.protected = depth, self._ctrl.protected
        self.channels, self.frame_blocks, self.slots = channels, frame_blocks, slots
        self.addr_bits = addr_bits
        self.host_base = 1 << (addr_bits - 1)
        self.ctrl_scrub_cycles = self._ctrl.scrub_cycles
        self.dma_scrub_cycles = self._dma.scrub_cycles
        self.scrub_cycles = max(self.ctrl_scrub_cycles, self.dma_scrub_cycles)
        # cycles RTS_STATUS.busy is high from the edge that takes the RTS_CTRL write: the
        # request register (1), then the store's latency; its answer clears busy at that edge
        self.rts_extend_cycles = 1 + self._rts.extend_latency
        self.rts_read_cycles = 1 + self._rts.read_latency
        cab = self._ctrl.addr_bits
        super().__init__({
            "mode_nv": In(Mode),
            "flr": In(1),
            "mode": Out(Mode),
            "mode_store": Out(Mode),
            "ready": Out(1),
            "fault": Out(1),
            "ready_state": Out(1),
            "host": In(Signature(ADDR_WIDTH)),
            "fw": In(Signature(ADDR_WIDTH)),
            "fw_id": In(OWNER_BITS),
            "mem_req": In(stream.Signature(mem_req_layout(cab))),
            "mem_resp": Out(stream.Signature(mem_resp_layout)),
            "desc": In(stream.Signature(desc_layout(addr_bits))),
            "status": Out(stream.Signature(status_layout)),
            "rd_req": Out(stream.Signature(rd_req_layout(addr_bits))),
            "rd_resp": In(stream.Signature(rd_resp_layout)),
            "wr": Out(stream.Signature(wr_layout(addr_bits))),
            "bb_base": In(addr_bits),
            "bb_limit": In(addr_bits),
        })

    def elaborate(self, platform):
        m = Module()
        ctrl, dma, copy = self._ctrl, self._dma, self._copy
        flr = self.flr
        m.submodules.ctrl = ctrl
        # cc_dma's reset is its FLR (docs/cc.md): a clock domain "dma" on the same clock
        # whose reset is rst | flr, for it, the plain engine and the glue. Not a
        # ResetInserter: gcm_core clears its reset-less key contexts by reading
        # ResetSignal() itself, which a ResetInserter does not reach (the FLR scan of
        # tb/cc/test_gpu_cc.py found the keys still there); DomainRenamer does.
        m.domains.dma = cd = ClockDomain("dma")
        m.d.comb += [cd.clk.eq(ClockSignal("sync")), cd.rst.eq(ResetSignal("sync") | flr)]
        m.submodules.dma = DomainRenamer("dma")(dma)
        m.submodules.copy = DomainRenamer("dma")(copy)
        g = Module()                    # the glue, in the FLR-reset domain as well
        m.submodules.glue = DomainRenamer("dma")(g)

        m.d.comb += [
            ctrl.mode_nv.eq(self.mode_nv), ctrl.flr.eq(flr),
            self.mode.eq(ctrl.mode), self.mode_store.eq(ctrl.mode_store),
            self.ready.eq(ctrl.ready), self.fault.eq(ctrl.fault),
        ]
        off = Signal()
        m.d.comb += off.eq(ctrl.mode == Mode.OFF)
        m.submodules.rts = self._rts        # sync domain: the cold reset only, never the FLR
        for eng in (dma, copy):
            m.d.comb += [eng.prot_base.eq(0), eng.prot_limit.eq(self.protected),
                         eng.bb_base.eq(self.bb_base), eng.bb_limit.eq(self.bb_limit)]

        # gpu_cc's own registers are closed while cc_ctrl scrubs (as its own ports are) and
        # in the FLR cycle: reads zero, writes ignored
        open_ = Signal()
        m.d.comb += open_.eq(ctrl.ready & ~flr)
        verified, ready_word = self._ready_state(m, g, open_)
        self._key_block(m, g, off, open_, ready_word)
        self._engines(m, off, verified)
        self._memory(m, g, off)
        return m

    # ---- firmware port: cc_ctrl's registers and the DMA key block --------------------------
    def _key_block(self, m, g, off, open_, ready_word):
        ctrl, dma, fw = self._ctrl, self._dma, self.fw
        mine = Signal()
        m.d.comb += mine.eq((fw.addr == DMA_KEY_CTRL) | (fw.addr == DMA_KEY_IV) |
                            (fw.addr == DMA_KEY_STATUS))
        rts_mine, rts_r_mine, rts_r_data = self._rts_block(m, open_, ready_word)
        m.d.comb += [
            ctrl.fw.addr.eq(fw.addr), ctrl.fw.w_data.eq(fw.w_data),
            ctrl.fw.r_stb.eq(fw.r_stb & ~mine & ~rts_mine), ctrl.fw.w_stb.eq(fw.w_stb & ~mine & ~rts_mine),
        ]
        iv = Signal(CTR_BITS)
        busy, refused = Signal(), Signal()
        installs = Signal(8)
        k_ch = Signal(CTX_BITS)
        k_key = Signal(256)             # snapshot of KEY0..7 for the pending install
        r_mine, r_data = Signal(), Signal(32)
        w = fw.w_stb & mine & open_
        go = w & (fw.addr == DMA_KEY_CTRL) & fw.w_data[DMA_KEY_GO.bit_length() - 1]
        with g.If(fw.r_stb):
            g.d.sync += r_mine.eq(mine)
        with g.If(fw.r_stb & mine):       # closed: reads zero
            g.d.sync += r_data.eq(Mux(~open_, 0, Mux(fw.addr == DMA_KEY_IV, iv,
                                      Mux(fw.addr == DMA_KEY_STATUS,
                                          _read_word("DMA_KEY_STATUS", busy=busy, refused=refused,
                                                     installs=installs), 0))))
        with g.If(w & (fw.addr == DMA_KEY_IV)):
            g.d.sync += iv.eq(fw.w_data)
        m.d.comb += fw.r_data.eq(Mux(r_mine, r_data, Mux(rts_r_mine, rts_r_data, ctrl.fw.r_data)))
        # CC off: BAR0 is the host's (it may write KEY0..7), so no install is accepted
        with g.If(go & off):
            g.d.sync += refused.eq(1)
        with g.Elif(go & ~busy):
            g.d.sync += [busy.eq(1), k_ch.eq(fw.w_data[:CTX_BITS]), k_key.eq(ctrl.key)]
        m.d.comb += [dma.key.valid.eq(busy), dma.key.payload.ch.eq(k_ch),
                     dma.key.payload.key.eq(k_key), dma.key.payload.iv.eq(iv)]
        with g.If(dma.key.valid & dma.key.ready):
            # the snapshot lets go of the key once the engine has it
            g.d.sync += [busy.eq(0), k_key.eq(0), installs.eq(installs + 1)]

    # ---- the GPU ready state (GPU_READY): the CVM's verdict gates the DMA in CC on --------
    def _ready_state(self, m, g, open_):
        """``GPU_READY`` on the host port, answered here (``cc_ctrl``'s decoupler never sees
        it); returns the READY flip-flop and the register's read word. READY lives in the
        ``dma`` domain, so every reset and FLR clears it; a pending mode change (the store
        differs from the active mode) clears it too and refuses a write of 1, so READY
        always speaks of the mode in force and of the measurements reported since the last
        FLR."""
        ctrl, host = self._ctrl, self.host
        mine = Signal()
        m.d.comb += mine.eq(host.addr == GPU_READY)
        # the rest of the host's accesses go to cc_ctrl (its decoupler)
        m.d.comb += [
            ctrl.host.addr.eq(host.addr), ctrl.host.w_data.eq(host.w_data),
            ctrl.host.r_stb.eq(host.r_stb & ~mine), ctrl.host.w_stb.eq(host.w_stb & ~mine),
        ]
        verified, held = Signal(name="ready_state_q"), Signal(name="ready_held")
        pending = Signal()
        m.d.comb += pending.eq(ctrl.mode_store != ctrl.mode)
        with g.If(pending):
            g.d.sync += verified.eq(0)
        with g.Elif(host.w_stb & mine & open_):
            g.d.sync += verified.eq(host.w_data[0])
        word = _read_word("GPU_READY", ready=verified, held=held)
        r_mine, r_data = Signal(name="ready_r_mine"), Signal(len(word), name="ready_r_data")
        with g.If(host.r_stb):
            g.d.sync += r_mine.eq(mine)
        with g.If(host.r_stb & mine):
            g.d.sync += r_data.eq(Mux(open_, word, 0))
        m.d.comb += [host.r_data.eq(Mux(r_mine, r_data, ctrl.host.r_data)), self.ready_state.eq(verified)]
        # a descriptor refused for READY (offered in CC on / devtools after the scrub)
        with g.If(self.desc.valid & (ctrl.mode != Mode.OFF) & ctrl.ready & ~verified):
            g.d.sync += held.eq(1)
        return verified, word

    # ---- the RTS on the firmware port ------------------------------------------------------
    def _rts_block(self, m, open_, ready_word):
        """``RTS_CTRL``/``RTS_STATUS``/``RTS_COUNT``/``RTS_REFUSED``/``RTS_DATA0..11`` (and a
        read of ``GPU_READY``) on the firmware port. Returns (address hit, read-data select,
        read data). In the ``sync`` domain: only the cold reset clears it, as the store."""
        rts, fw = self._rts, self.fw
        sb = rts.slot_bits
        words = [RTS_DATA + 4 * k for k in range(RTS_WORDS)]
        hit = {a: Signal(name=f"fw_hit_{a:02x}") for a in (RTS_CTRL, RTS_STATUS, RTS_COUNT, RTS_REFUSED,
                                                             GPU_READY, *words)}
        for a, h in hit.items():
            m.d.comb += h.eq(fw.addr == a)
        mine = Signal()
        m.d.comb += mine.eq(Cat(*hit.values()).any())
        w = fw.w_stb & open_
        value = [Signal(32, name=f"rts_wdata{k}") for k in range(RTS_WORDS)]   # the next extend's value
        busy, refused = Signal(name="rts_busy"), Signal(name="rts_refused_last")
        req_slot, req_owner = Signal(sb, name="rts_req_slot"), Signal(OWNER_BITS, name="rts_req_owner")
        ext_valid, rd_valid = Signal(name="rts_ext_valid"), Signal(name="rts_rd_valid")
        last = Signal(rts.rd_resp.payload.shape(), name="rts_last")     # the last slot read
        for k, a in enumerate(words):
            with m.If(w & hit[a] & ~busy):                  # the value holds while an extend is in flight
                m.d.sync += value[k].eq(fw.w_data)
        go = w & hit[RTS_CTRL] & ~busy
        want_ext, want_rd = (fw.w_data & RTS_EXTEND).any(), (fw.w_data & RTS_READ).any()
        with m.If(go & (want_ext | want_rd)):
            # the owner is the hardware id of the initiator on the bus, never a data field
            m.d.sync += [busy.eq(1), req_slot.eq(fw.w_data[:sb]), req_owner.eq(self.fw_id),
                         ext_valid.eq(want_ext), rd_valid.eq(~want_ext)]
        m.d.comb += [
            rts.extend.valid.eq(ext_valid), rts.extend.payload.slot.eq(req_slot),
            rts.extend.payload.owner.eq(req_owner), rts.extend.payload.value.eq(Cat(*value)),
            rts.rd.valid.eq(rd_valid), rts.rd.payload.slot.eq(req_slot),
            rts.resp.ready.eq(1), rts.rd_resp.ready.eq(1),
        ]
        with m.If(ext_valid & rts.extend.ready):
            m.d.sync += ext_valid.eq(0)
        with m.If(rd_valid & rts.rd.ready):
            m.d.sync += rd_valid.eq(0)
        with m.If(rts.resp.valid):
            m.d.sync += [busy.eq(0), refused.eq(rts.resp.payload.status == RtsStatus.REFUSED_OWNER)]
        with m.If(rts.rd_resp.valid):
            m.d.sync += [busy.eq(0), last.eq(rts.rd_resp.payload)]
        # reads: registered, zero while closed
        r_mine, r_data = Signal(name="rts_r_mine"), Signal(32, name="rts_r_data")
        lv = last.value
        sel = Const(0, 32)
        for k, a in enumerate(words):
            sel = Mux(hit[a], lv[32 * k:32 * k + 32], sel)
        sel = Mux(hit[RTS_STATUS], _read_word("RTS_STATUS", busy=busy, refused=refused, ready=rts.ready,
                                              owner=last.owner, bound=last.bound), sel)
        sel = Mux(hit[RTS_COUNT], last.count, sel)
        sel = Mux(hit[RTS_REFUSED], rts.refused, sel)
        sel = Mux(hit[GPU_READY], ready_word, sel)
        with m.If(fw.r_stb):
            m.d.sync += r_mine.eq(mine)
        with m.If(fw.r_stb & mine):
            m.d.sync += r_data.eq(Mux(open_, sel, 0))
        return mine, r_mine, r_data

    # ---- descriptors: the mode picks the engine --------------------------------------------
    def _engines(self, m, off, verified):
        dma, copy, ctrl = self._dma, self._copy, self._ctrl
        d = self.desc
        # no descriptor before cc_ctrl's memory scrub is done; in CC on / devtools none
        # before the CVM set READY (held: not taken, nothing read or written)
        m.d.comb += [
            dma.desc.payload.eq(d.payload), copy.desc.payload.eq(d.payload),
            dma.desc.valid.eq(d.valid & ~off & ctrl.ready & verified),
            copy.desc.valid.eq(d.valid & off & ctrl.ready),
            d.ready.eq(ctrl.ready & Mux(off, copy.desc.ready, dma.desc.ready & verified)),
            self.status.valid.eq(Mux(off, copy.status.valid, dma.status.valid)),
            self.status.payload.eq(Mux(off, copy.status.payload, dma.status.payload)),
            dma.status.ready.eq(self.status.ready & ~off),
            copy.status.ready.eq(self.status.ready & off),
        ]

    # ---- memory routing: host memory / device memory (cc_ctrl) -----------------------------
    def _memory(self, m, g, off):
        dma, copy, ctrl = self._dma, self._copy, self._ctrl
        ab, hb = self.addr_bits, self.addr_bits - 1
        # the engine in use (the other one is idle: the mode changes only at an FLR)
        e_rq_valid = Signal()
        e_rq_addr = Signal(ab)
        e_wr_valid = Signal()
        e_wr_addr = Signal(ab)
        e_wr_data = Signal(BLOCK_BITS)
        e_rq_ready = Signal()
        e_rs_valid, e_rs_data, e_rs_ready = Signal(), Signal(BLOCK_BITS), Signal()
        m.d.comb += [
            e_rq_valid.eq(Mux(off, copy.rd_req.valid, dma.rd_req.valid)),
            e_rq_addr.eq(Mux(off, copy.rd_req.payload.addr, dma.rd_req.payload.addr)),
            e_wr_valid.eq(Mux(off, copy.wr.valid, dma.wr.valid)),
            e_wr_addr.eq(Mux(off, copy.wr.payload.addr, dma.wr.payload.addr)),
            e_wr_data.eq(Mux(off, copy.wr.payload.data, dma.wr.payload.data)),
            copy.rd_resp.valid.eq(e_rs_valid & off), dma.rd_resp.valid.eq(e_rs_valid & ~off),
            copy.rd_resp.payload.data.eq(e_rs_data), dma.rd_resp.payload.data.eq(e_rs_data),
            e_rs_ready.eq(Mux(off, copy.rd_resp.ready, dma.rd_resp.ready)),
        ]
        rq_host, wr_host = e_rq_addr[hb], e_wr_addr[hb]

        # reads in flight, in issue order: 1 = host memory, 0 = device memory (no secret)
        g.submodules.route = route = fifo.SyncFIFO(width=1, depth=self.ROUTE_DEPTH)
        g.submodules.dev_q = dev_q = _RegQueue(BLOCK_BITS, self.RESP_DEPTH)

        # device memory arbiter: DMA write > DMA read > external port
        cab = ctrl.addr_bits
        OWN_RD, OWN_WR, OWN_EXT = 1, 2, 3     # (0: nothing since the reset)
        owner = Signal(2)               # who the request in cc_ctrl's response register is of
        creq, cresp = ctrl.mem_req, ctrl.mem_resp
        pend = cresp.valid & (owner == OWN_RD)
        credit = Signal()
        m.d.comb += credit.eq(dev_q.level + pend < self.RESP_DEPTH)
        dev_wr = e_wr_valid & ~wr_host
        dev_rd = e_rq_valid & ~rq_host & route.w_rdy & credit
        ext = self.mem_req
        sel = Signal(2)
        with m.If(dev_wr):
            m.d.comb += [sel.eq(OWN_WR), creq.valid.eq(1), creq.payload.src.eq(Src.DMA),
                         creq.payload.addr.eq(e_wr_addr[:cab]), creq.payload.write.eq(1),
                         creq.payload.data.eq(e_wr_data)]
        with m.Elif(dev_rd):
            m.d.comb += [sel.eq(OWN_RD), creq.valid.eq(1), creq.payload.src.eq(Src.DMA),
                         creq.payload.addr.eq(e_rq_addr[:cab]), creq.payload.write.eq(0)]
        with m.Else():
            # the outside may not pass for the DMA (which the firewall lets go anywhere)
            m.d.comb += [sel.eq(OWN_EXT), creq.valid.eq(ext.valid),
                         creq.payload.src.eq(Mux(ext.payload.src == Src.DMA, 3, ext.payload.src)),
                         creq.payload.addr.eq(ext.payload.addr),
                         creq.payload.write.eq(ext.payload.write),
                         creq.payload.data.eq(ext.payload.data),
                         ext.ready.eq(creq.ready)]
        with g.If(creq.valid & creq.ready):
            g.d.sync += owner.eq(sel)
        # answers: DMA writes' are dropped, reads' go to the queue (room by credit)
        m.d.comb += [
            cresp.ready.eq(Mux(owner == OWN_EXT, self.mem_resp.ready, 1)),
            self.mem_resp.valid.eq(cresp.valid & (owner == OWN_EXT)),
            self.mem_resp.payload.eq(cresp.payload),
            dev_q.w_en.eq(cresp.valid & (owner == OWN_RD)),
            dev_q.w_data.eq(cresp.payload.data),
        ]

        # engine reads: host memory or the arbiter; the route queue remembers which.
        # Each engine's ready is built from its own request only, not from the muxed one:
        # through the mux the plain engine's ready depended on cc_dma's write address (a
        # 30-level path in gpu_cc from cc_dma's done_q to the plain engine's counters).
        host_rd = e_rq_valid & rq_host & route.w_rdy
        for eng, mine in ((copy, off), (dma, ~off)):
            own_rq_host, own_wr_host = eng.rd_req.payload.addr[hb], eng.wr.payload.addr[hb]
            own_dev_wr = eng.wr.valid & ~own_wr_host
            m.d.comb += [
                eng.rd_req.ready.eq(mine & Mux(
                    own_rq_host, self.rd_req.ready & route.w_rdy,
                    eng.rd_req.valid & route.w_rdy & credit & ~own_dev_wr & creq.ready)),
                eng.wr.ready.eq(mine & Mux(own_wr_host, self.wr.ready, creq.ready)),
            ]
        m.d.comb += [
            self.rd_req.valid.eq(host_rd), self.rd_req.payload.addr.eq(e_rq_addr),
            e_rq_ready.eq(Mux(off, copy.rd_req.ready, dma.rd_req.ready)),
            route.w_en.eq(e_rq_valid & e_rq_ready), route.w_data.eq(rq_host),
        ]
        # answers back to the engine in issue order. Host memory may answer a read issued
        # before an FLR after it: while cc_ctrl scrubs (no engine can have issued a read
        # yet) host responses are taken and dropped, never routed to the next read.
        head_host = route.r_data[0]
        m.d.comb += [
            e_rs_valid.eq(route.r_rdy & Mux(head_host, self.rd_resp.valid, dev_q.r_rdy)),
            e_rs_data.eq(Mux(head_host, self.rd_resp.payload.data, dev_q.r_data)),
            self.rd_resp.ready.eq((route.r_rdy & head_host & e_rs_ready) | ~ctrl.ready),
            dev_q.r_en.eq(route.r_rdy & ~head_host & e_rs_ready),
            route.r_en.eq(e_rs_valid & e_rs_ready),
        ]
        # engine writes: host memory or the arbiter (first priority there)
        m.d.comb += [
            self.wr.valid.eq(e_wr_valid & wr_host),
            self.wr.payload.addr.eq(e_wr_addr), self.wr.payload.data.eq(e_wr_data),
        ]
