"""``CCCtrl`` (design ``cc_ctrl``): the H100-style confidential-mode controller.

- **Mode** (:class:`~hw.cc.layout.Mode`: off / on / devtools). The persistent store models
  the EEPROM CC control bit: the EEPROM itself is outside (the board); at power-on
  (``rst``) the store and the active mode load ``mode_nv``; ``CC_MODE_SET`` writes the
  store (shown on ``mode_store``, which the board writes back to the EEPROM); the store
  becomes the active mode only at the next function-level reset (``flr``). A code of 3 is
  fail-secure: loaded at power-on it acts as ``ON``; written, it is ignored
  (``CC_STATUS.bad_mode``). ``mode`` (the active mode) is a port for the CCU's
  measurement and is readable in ``CC_MODE``.
- **Reset scrub.** ``rst`` and ``flr`` start the scrub: in the reset cycle every register
  (key state, scratch, logs, counters, the CSR read-data registers) is cleared, then the
  scrub engine writes zero to every word of the memory, one per cycle (``depth`` cycles).
  While it runs (``ready`` = 0) the memory port takes nothing and the host may only read
  ``CC_MODE``; the firmware port is closed too. An ``flr`` during a scrub restarts it.
  An access in flight when ``flr`` arrives (a response not yet taken) is dropped, as a
  PCIe FLR aborts outstanding requests.
- **BAR0 decoupler.** Host register accesses (``host``, a :class:`hw.csr.Signature` bus)
  pass the allow-list :data:`hw.cc.regs.ALLOW` for the current row (the active mode, or
  ``SCRUB``): refused reads return zero, refused writes are ignored, both counted in
  ``DEC_COUNT`` with the address latched in ``DEC_LOG``. ``fw`` is the trusted firmware
  (GSP) port to the same registers, unfiltered.
- **Firewall** on ``mem_req``/``mem_resp`` (one 128-bit word per request, a response for
  every request, in order). Words ``[0, protected)`` are the protected region. In CC on
  and devtools: a host (PCIe) access to the protected region is refused (read returns
  zero, ``ok`` = 0, write dropped) and logged (``FW_COUNT``, ``FW_LOG``); an engine other
  than the DMA writing outside the protected region is refused, logged and raises
  ``CC_STATUS.fault`` (output ``fault``). The DMA may go anywhere (it encrypts whatever
  leaves, hw/cc/dma.py). Initiator code 3 obeys the host's rules. CC off refuses nothing.
- **Performance counters** ``PERF_CYCLES``/``PERF_ACCESSES`` count while ``PERF_CTRL.en``
  in CC off and devtools and are held at zero in CC on.

Parameters: *depth* (memory words of 128 bits, a power of two; the scrub takes ``depth``
cycles) and *protected* (words of the protected region, 1..depth).
"""
from types import SimpleNamespace

from amaranth.hdl import Cat, Const, Module, Mux, ResetInserter, ResetSignal, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from hw.common import increment
from hw.csr import RegisterFile, Signature

from .layout import BLOCK_BITS, KEY_BITS, Mode, Src, mem_req_layout, mem_resp_layout
from .regs import ADDR_WIDTH, FW_ADDR_BITS, KEY_WORDS, ROWS, SCRUB, _perm, register_map

__all__ = ["CCCtrl"]

SAT = (1 << 32) - 1


class CCCtrl(wiring.Component):
    """Mode controller, reset scrub, BAR0 decoupler, firewall and performance counters
    (see the module docstring). Ports: ``mode_nv`` In, ``flr`` In, ``mode``, ``mode_store``,
    ``ready``, ``fault`` Out, ``key`` Out (256, the key state), ``host`` and ``fw`` CSR
    buses, ``mem_req`` In / ``mem_resp`` Out streams."""

    def __init__(self, depth=256, protected=None, *, _formal_mutant=None):
        if isinstance(depth, bool) or not isinstance(depth, int) or depth < 2 or \
                depth & (depth - 1) or depth > 1 << FW_ADDR_BITS:
            raise ValueError(f"depth must be a power of two in 2..2^{FW_ADDR_BITS}, not {depth!r}")
        protected = depth * 3 // 4 if protected is None else protected
        if isinstance(protected, bool) or not isinstance(protected, int) or not 1 <= protected <= depth:
            raise ValueError(f"protected must be an int in 1..{depth}, not {protected!r}")
        self.depth, self.protected = depth, protected
        # test-only seeded bugs for formal/cc.py (never set in a design): "open_scratch0"
        # lets the host reach SCRATCH0 in CC on; "counters_wrap" drops the saturation of the
        # decoupler's and the firewall's refusal counters; "firewall_open_cc_on" refuses
        # nothing in CC on; "protected_end_short" leaves the last protected word out of the
        # region; "scrub_short" stops the memory scrub one word short; "flr_no_scrub" does
        # not restart the scrub on flr; "key_words_reversed" puts KEY0 at the top of `key`;
        # "perf_in_cc_on" lets the performance counters run in CC on; "mode_set_3" stores a
        # CC_MODE_SET of 3 (not fail-secure: it would load as ON only at the next power-on)
        if _formal_mutant not in (None, "open_scratch0", "counters_wrap", "firewall_open_cc_on",
                                  "protected_end_short", "scrub_short", "flr_no_scrub",
                                  "key_words_reversed", "perf_in_cc_on", "mode_set_3"):
            raise ValueError(f"unknown _formal_mutant {_formal_mutant!r}")
        self._formal_mutant = _formal_mutant
        # cycles `ready` stays low after the reset or FLR cycle: one memory word per cycle
        self.scrub_cycles = depth
        self.addr_bits = (depth - 1).bit_length()
        self.regmap = register_map()
        super().__init__({
            "mode_nv": In(Mode),
            "flr": In(1),
            "mode": Out(Mode),
            "mode_store": Out(Mode),
            "ready": Out(1),
            "fault": Out(1),
            "key": Out(KEY_BITS),
            "host": In(Signature(ADDR_WIDTH)),
            "fw": In(Signature(ADDR_WIDTH)),
            "mem_req": In(stream.Signature(mem_req_layout(self.addr_bits))),
            "mem_resp": Out(stream.Signature(mem_resp_layout)),
        })
        self._rf = RegisterFile(self.regmap, ports=("fw", "host"))

    def _count_up(self, counter, incremented):
        # a refusal counter's next value: it holds at 2^32 - 1 (formal/cc.py proves it)
        if self._formal_mutant == "counters_wrap":
            return incremented
        return Mux(counter.all(), SAT, incremented)

    def elaborate(self, platform):
        m = Module()
        # every register of the map (and the bridges' read-data registers) clears on flr
        m.submodules.regs = ResetInserter(self.flr)(self._rf)
        net = SimpleNamespace(rst=ResetSignal(), flr=self.flr)
        self._mode(m, net)
        self._scrub_engine(m, net)
        self._decoupler(m, net)
        self._firewall(m, net)
        self._perf_counters(m, net)
        self._register_values(m, net)
        return m

    # ---- mode store and active mode (survive flr; loaded from mode_nv at power-on) -----
    def _mode(self, m, net):
        net.store = store = Signal(Mode, reset_less=True)
        net.active = active = Signal(Mode, reset_less=True)
        nv = Signal(Mode)
        m.d.comb += nv.eq(Mux(self.mode_nv.as_value() == 3, Mode.ON, self.mode_nv))
        net.set_f = set_f = self._rf["CC_MODE_SET"]["mode"]
        with m.If(net.rst):
            m.d.sync += [store.eq(nv), active.eq(nv)]
        with m.Else():
            accepted = set_f.stb if self._formal_mutant == "mode_set_3" else set_f.stb & (set_f.data != 3)
            with m.If(accepted):
                m.d.sync += store.eq(set_f.data)
            with m.If(net.flr):
                m.d.sync += active.eq(store)
        m.d.comb += [self.mode.eq(active), self.mode_store.eq(store)]

    # ---- scrub engine: zero one memory word per cycle after rst or flr -----------------
    def _scrub_engine(self, m, net):
        net.scrubbing = scrubbing = Signal(init=1)      # runs after power-on too
        net.scrub_addr = scrub_addr = Signal(self.addr_bits)
        with m.If(net.flr):
            m.d.sync += [scrubbing.eq(0 if self._formal_mutant == "flr_no_scrub" else 1), scrub_addr.eq(0)]
        with m.Elif(scrubbing):
            m.d.sync += scrub_addr.eq(scrub_addr + 1)
            with m.If(scrub_addr == self.depth - (2 if self._formal_mutant == "scrub_short" else 1)):
                m.d.sync += scrubbing.eq(0)
        net.blocked = scrubbing | net.flr
        m.d.comb += self.ready.eq(~scrubbing)

    # ---- BAR0 decoupler: the host's accesses through the allow-list ------------------
    def _decoupler(self, m, net):
        rf, flr, blocked = self._rf, net.flr, net.blocked
        host, rfh = self.host, rf.host
        row_sel = Signal(range(len(ROWS)))
        m.d.comb += row_sel.eq(Mux(blocked, ROWS.index(SCRUB), net.active.as_value()))
        may_r, may_w = Signal(), Signal()
        for r in self.regmap:
            perms = _perm(r.name)
            if self._formal_mutant == "open_scratch0" and r.name == "SCRATCH0":
                perms = ("rw", "rw", "rw", "-")
            rows_r = [i for i, p in enumerate(perms) if "r" in p]
            rows_w = [i for i, p in enumerate(perms) if "w" in p]
            hit = host.addr == r.addr
            in_r = Cat(*(row_sel == i for i in rows_r)).any() if rows_r else Const(0)
            in_w = Cat(*(row_sel == i for i in rows_w)).any() if rows_w else Const(0)
            with m.If(hit):
                m.d.comb += [may_r.eq(in_r), may_w.eq(in_w)]
        # Mode code 3 selects no row: row_sel 3 is SCRUB's, the safest (active is never 3).
        h_r = host.r_stb & ~flr
        h_w = host.w_stb & ~flr
        refused_r = h_r & ~may_r
        refused_w = h_w & ~may_w
        r_masked = Signal()
        m.d.comb += [
            rfh.addr.eq(host.addr), rfh.w_data.eq(host.w_data),
            rfh.r_stb.eq(h_r & may_r), rfh.w_stb.eq(h_w & may_w),
            host.r_data.eq(Mux(r_masked, 0, rfh.r_data)),
        ]
        with m.If(flr):
            m.d.sync += r_masked.eq(0)
        with m.Elif(host.r_stb):
            m.d.sync += r_masked.eq(refused_r)
        fwp = self.fw
        m.d.comb += [
            rf.fw.addr.eq(fwp.addr), rf.fw.w_data.eq(fwp.w_data),
            rf.fw.r_stb.eq(fwp.r_stb & ~blocked), rf.fw.w_stb.eq(fwp.w_stb & ~blocked),
            fwp.r_data.eq(rf.fw.r_data),
        ]
        net.dec_count = dec_count = Signal(32)
        net.dec_addr = dec_addr = Signal(ADDR_WIDTH)
        net.dec_write = dec_write = Signal()
        # saturating counters: a log-depth increment (a plain `+ 1` becomes a ripple chain
        # in ABC) and saturation as an AND of all bits
        dec_count_inc = increment(m, dec_count, "dec_count_inc")
        with m.If(flr):
            m.d.sync += [dec_count.eq(0), dec_addr.eq(0), dec_write.eq(0)]
        with m.Elif(refused_r | refused_w):
            m.d.sync += [dec_count.eq(self._count_up(dec_count, dec_count_inc)),
                         dec_addr.eq(host.addr), dec_write.eq(refused_w)]

    # ---- firewall and memory -----------------------------------------------------------
    def _firewall(self, m, net):
        flr, scrubbing = net.flr, net.scrubbing
        m.submodules.mem = mem = Memory(shape=BLOCK_BITS, depth=self.depth, init=[])
        wp, rp = mem.write_port(), mem.read_port()
        req, resp = self.mem_req.payload, self.mem_resp
        resp_ok, resp_rd = Signal(), Signal()
        with m.If(flr):
            # the response register lets go of the word it held (its data lines are
            # Mux(ok & rd, rp.data, 0): clearing ok/rd zeroes them from the next cycle)
            m.d.sync += [resp.valid.eq(0), resp_ok.eq(0), resp_rd.eq(0)]
        m.d.comb += self.mem_req.ready.eq(~net.blocked & (~resp.valid | resp.ready))
        net.take = take = self.mem_req.valid & self.mem_req.ready
        last = self.protected - (1 if self._formal_mutant == "protected_end_short" else 0)
        prot = req.addr < last if last < self.depth else Const(1)
        src = req.src.as_value()
        host_like = (src == Src.HOST.value) | (src == 3)
        refuse = Signal()
        guarded = net.active != Mode.OFF
        if self._formal_mutant == "firewall_open_cc_on":
            guarded = guarded & (net.active != Mode.ON)
        m.d.comb += refuse.eq(guarded & (
            (host_like & prot) | ((src == Src.ENGINE.value) & req.write & ~prot)))
        with m.If(take):
            m.d.sync += [resp.valid.eq(1), resp_ok.eq(~refuse), resp_rd.eq(~req.write)]
        with m.Elif(resp.ready & ~flr):
            m.d.sync += resp.valid.eq(0)
        m.d.comb += [
            # while the scrub runs the read port re-reads word 0 (zeroed in the walk's first
            # cycle): its data register (no reset) lets go of the last word read before the
            # reset — protected data the DMA read in gpu_cc (found by its FLR scan)
            rp.addr.eq(Mux(scrubbing, 0, req.addr)),
            rp.en.eq(scrubbing | (take & ~refuse & ~req.write)),
            resp.payload.ok.eq(resp_ok),
            resp.payload.data.eq(Mux(resp_ok & resp_rd, rp.data, 0)),
            wp.addr.eq(Mux(scrubbing, net.scrub_addr, req.addr)),
            wp.data.eq(Mux(scrubbing, 0, req.data)),
            wp.en.eq(scrubbing | (take & ~refuse & req.write)),
        ]
        net.fw_count = fw_count = Signal(32)
        net.fw_log = fw_log = Signal(FW_ADDR_BITS + 3)
        fw_count_inc = increment(m, fw_count, "fw_count_inc")     # as dec_count
        with m.If(flr):
            m.d.sync += [fw_count.eq(0), fw_log.eq(0)]
        with m.Elif(take & refuse):
            m.d.sync += [fw_count.eq(self._count_up(fw_count, fw_count_inc)),
                         fw_log.eq(Cat(req.addr, Const(0, FW_ADDR_BITS - self.addr_bits),
                                       req.src, req.write))]
        net.engine_fault = take & refuse & (src == Src.ENGINE.value)

    # ---- performance counters ----------------------------------------------------------
    def _perf_counters(self, m, net):
        active = net.active
        counting = self._rf["PERF_CTRL"]["en"].q & (active != Mode.ON)
        cleared = net.flr | (active == Mode.ON)
        if self._formal_mutant == "perf_in_cc_on":
            counting, cleared = self._rf["PERF_CTRL"]["en"].q, net.flr
        net.cycles = cycles = Signal(32)
        net.accesses = accesses = Signal(32)
        # log-depth increments: a plain `+ 1` becomes a 32-bit ripple chain in ABC, which
        # measured 31 gate levels once cc_ctrl sat inside gpu_cc
        cycles_inc = increment(m, cycles, "perf_cycles_inc")
        accesses_inc = increment(m, accesses, "perf_accesses_inc")
        with m.If(cleared):
            m.d.sync += [cycles.eq(0), accesses.eq(0)]
        with m.Elif(counting):
            m.d.sync += [cycles.eq(cycles_inc),
                         accesses.eq(Mux(net.take, accesses_inc, accesses))]

    # ---- register values ---------------------------------------------------------------
    def _register_values(self, m, net):
        rf, flr, set_f, fw_log = self._rf, net.flr, net.set_f, net.fw_log
        order = range(KEY_WORDS)[::-1] if self._formal_mutant == "key_words_reversed" else range(KEY_WORDS)
        m.d.comb += [
            rf["CC_MODE"]["active"].r.eq(net.active),
            rf["CC_MODE"]["pending"].r.eq(net.store),
            rf["CC_MODE"]["scrubbing"].r.eq(net.scrubbing),
            rf["CC_STATUS"]["fault"].set.eq(net.engine_fault & ~flr),
            rf["CC_STATUS"]["bad_mode"].set.eq(set_f.stb & (set_f.data == 3) & ~flr),
            rf["DEC_COUNT"]["count"].r.eq(net.dec_count),
            rf["DEC_LOG"]["addr"].r.eq(net.dec_addr),
            rf["DEC_LOG"]["write"].r.eq(net.dec_write),
            rf["FW_COUNT"]["count"].r.eq(net.fw_count),
            rf["FW_LOG"]["addr"].r.eq(fw_log[:FW_ADDR_BITS]),
            rf["FW_LOG"]["src"].r.eq(fw_log[FW_ADDR_BITS:FW_ADDR_BITS + 2]),
            rf["FW_LOG"]["write"].r.eq(fw_log[FW_ADDR_BITS + 2]),
            rf["PERF_CYCLES"]["count"].r.eq(net.cycles),
            rf["PERF_ACCESSES"]["count"].r.eq(net.accesses),
            self.fault.eq(rf["CC_STATUS"]["fault"].q),
            self.key.eq(Cat(*(rf[f"KEY{k}"]["key"].q for k in order))),
        ]
