"""``SXP``: the Secure Exchange Pipe (ports and behaviour: docs/sxp.md).

Two engines, one per direction, so writes and read completions each move one beat (``lanes``
blocks) per cycle at the same time::

    xb_i ──▶ Ingress(requests) ──▶ ReadParking ──▶ EnginePath(encrypt) ──▶ pcie_o
                 │  ▲                   ▲ release
    pcie_i ─▶ Ingress(completions) ─────┴────────▶ EnginePath(decrypt) ──▶ xb_o
                 │  │                                   ▲ key        ▲ key
                 ▼  └─ config ◀─ RegisterFile ─▶ KeyStager ───────────┘
        ExceptionRecorder ◀── events (both ingresses, both engines, TrustGate) ── irq

- :class:`~hw.sxp.ingress.Ingress` (one per direction): skid buffer, registered check
  stages (KXBCTXMAP → KPHYSMAP → KSELLIMIT for requests), framer (verdict latched on the
  first beat, beat counting against ``length``, IV/DATA/MAC/NOP per beat).
- :class:`~hw.sxp.parking.ReadParking`: one aes read per physical context outstanding.
- :class:`~hw.sxp.engine.EnginePath` (one per direction): a ``gcm_core`` with the packet
  information of each beat in a FIFO beside it; every beat of the direction goes through it
  in order.
- :class:`~hw.sxp.control.KeyStager`, :class:`~hw.sxp.control.TrustGate`,
  :class:`~hw.sxp.control.ExceptionRecorder`; registers :func:`hw.sxp.regs.register_map`
  behind :class:`hw.csr.RegisterFile` with ports ``ccu`` and ``host``.
"""
from amaranth.hdl import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from hw import csr
from hw.common import add, check_choice
from hw.gcm.layout import check_contexts

from .control import ExceptionRecorder, KeyStager, TrustGate
from .engine import EnginePath
from .ingress import Ingress, event_layout
from .packet import beat_layout
from .parking import ReadParking
from .regs import KEY_WORDS, REGIONS, XBCTX_ENTRIES, Cause, is_config_register, register_map

__all__ = ["SXP"]


class SXP(wiring.Component):
    """Secure Exchange Pipe with *contexts* physical key contexts (1..16) and beats of
    *lanes* 128-bit blocks (1, 2, 4).

    Ports: ``xb_i``, ``pcie_o``, ``pcie_i``, ``xb_o`` (streams of
    :func:`hw.sxp.packet.beat_layout`), ``host`` and ``ccu`` (:class:`hw.csr.Signature`),
    ``irq``.
    """

    _MUTANTS = (None, "key_to_pcie_o", "key_in_exc_addr", "ccu_writes_limit", "host_reads_kxbctxmap")

    def __init__(self, contexts=16, lanes=1, *, karatsuba=None, _formal_mutant=None):
        # test-only seeded bugs for formal/sxp.py (never set in a design): "key_to_pcie_o" (staging
        # word 0 ORed onto pcie_o's data), "key_in_exc_addr" (the CONFIG exception records
        # KEY_W0's write data as its address), "ccu_writes_limit" (the ccu may write KSEL_LIMIT
        # in trusted mode), "host_reads_kxbctxmap" (the host may read KXBCTXMAP in trusted mode)
        if _formal_mutant not in self._MUTANTS:
            raise ValueError(f"unknown _formal_mutant {_formal_mutant!r}")
        self._formal_mutant = _formal_mutant
        self.contexts = check_contexts(contexts)
        self.lanes = check_choice("lanes", lanes, (1, 2, 4))
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
        self.requests = Ingress(requests=True, contexts=contexts, lanes=lanes)
        self.completions = Ingress(requests=False, contexts=contexts, lanes=lanes)
        self.parking = ReadParking(contexts=contexts, lanes=lanes)
        self.engine_w = EnginePath(decrypt=False, contexts=contexts, lanes=lanes, karatsuba=karatsuba)
        self.engine_r = EnginePath(decrypt=True, contexts=contexts, lanes=lanes, karatsuba=karatsuba)
        self.keys = KeyStager(contexts)
        self.trust = TrustGate(contexts)
        self.exceptions = ExceptionRecorder(sources=5)

    def elaborate(self, platform):
        m = Module()
        n = self.contexts
        for name in ("requests", "completions", "parking", "engine_w", "engine_r", "keys",
                     "trust", "exceptions"):
            m.submodules[name] = getattr(self, name)
        req, cpl, park = self.requests, self.completions, self.parking
        eng_w, eng_r, keys, trust, exc = self.engine_w, self.engine_r, self.keys, self.trust, \
            self.exceptions

        # the two pipes
        wiring.connect(m, wiring.flipped(self.xb_i), req.i)
        wiring.connect(m, req.o, park.i)
        wiring.connect(m, park.o, eng_w.i)
        if self._formal_mutant == "key_to_pcie_o":
            m.d.comb += [self.pcie_o.valid.eq(eng_w.o.valid), eng_w.o.ready.eq(self.pcie_o.ready),
                         self.pcie_o.payload.eq(eng_w.o.payload),
                         self.pcie_o.payload.data.eq(eng_w.o.payload.data | keys.stage[0])]
        else:
            wiring.connect(m, eng_w.o, wiring.flipped(self.pcie_o))
        wiring.connect(m, wiring.flipped(self.pcie_i), cpl.i)
        wiring.connect(m, cpl.o, eng_r.i)
        wiring.connect(m, eng_r.o, wiring.flipped(self.xb_o))
        m.d.comb += park.release.eq(cpl.release)

        # registers. From the trust request on (TrustGate.locked: while the request is checked
        # and in trusted mode) the host can neither change nor read anything, and the ccu
        # cannot change the configuration: the configuration in force is the one checked
        config = is_config_register
        mutant = self._formal_mutant

        def ccu_write_allowed(rf, reg):
            if mutant == "ccu_writes_limit" and reg.name.startswith("KSEL_LIMIT"):
                return True
            return ~trust.locked if config(reg) else True

        def host_read_allowed(rf, reg):
            if mutant == "host_reads_kxbctxmap" and reg.name.startswith("KXBCTXMAP"):
                return True
            return ~trust.locked

        m.submodules.regs = regs = csr.RegisterFile(
            self.regmap, ports=("ccu", "host"),
            write_allowed={"host": lambda rf, reg: ~trust.locked, "ccu": ccu_write_allowed},
            read_allowed={"host": host_read_allowed})
        wiring.connect(m, wiring.flipped(self.ccu), regs.ccu)
        wiring.connect(m, wiring.flipped(self.host), regs.host)
        for i in range(XBCTX_ENTRIES):
            m.d.comb += req.kxbctxmap[i].eq(regs[f"KXBCTXMAP{i}"]["phys"].q)
        for p in range(n):
            kp = regs[f"KPHYSMAP{p}"]["region"].q
            m.d.comb += [req.kphysmap[p].eq(kp), trust.kphysmap[p].eq(kp)]
        for r in range(REGIONS):
            base, limit = regs[f"KSEL_BASE{r}"]["addr"].q, regs[f"KSEL_LIMIT{r}"]["addr"].q
            m.d.comb += [req.base[r].eq(base), req.limit[r].eq(limit),
                         trust.base[r].eq(base), trust.limit[r].eq(limit)]

        # keys: staged over the CSR ports, installed into both engines
        for k in range(KEY_WORDS):
            f = regs[f"KEY_W{k}"]["key"]
            m.d.comb += [keys.word_stb[k].eq(f.stb), keys.word_data[k].eq(f.data)]
        commit = regs["KEY_COMMIT"]["ctx"]
        m.d.comb += [keys.commit_stb.eq(commit.stb), keys.commit_ctx.eq(commit.data)]
        wiring.connect(m, keys.key_w, eng_w.key)
        wiring.connect(m, keys.key_r, eng_r.key)

        # trusted mode
        ctrl = regs["CTRL"]["trust"]
        m.d.comb += trust.request.eq(ctrl.stb & ctrl.data[0])
        config_event = Signal(event_layout)
        m.d.comb += [config_event.valid.eq(trust.refused), config_event.cause.eq(Cause.CONFIG)]
        if mutant == "key_in_exc_addr":
            m.d.comb += config_event.addr.eq(regs["KEY_W0"]["key"].data)

        # exceptions, in latching priority: engines, request checks, completion checks, CONFIG
        status = regs["STATUS"]
        for k, ev in enumerate((eng_w.event, eng_r.event, req.event, cpl.event, config_event)):
            m.d.comb += exc.events[k].eq(ev)
        # DENIED: refused accesses of both ports (the host's from the trust request on, the
        # ccu's configuration writes from the trust request on), up to two in a cycle
        denied = Signal(32)
        refused = Signal(2, name="denied_new")
        m.d.comb += refused.eq(regs.bridges["host"].denied + regs.bridges["ccu"].denied)
        m.d.sync += denied.eq(add(m, denied, refused, 32, "denied_add"))
        m.d.comb += [
            exc.exc.eq(status["exc"].q),
            status["exc"].set.eq(exc.set),
            status["trusted"].r.eq(trust.trusted),
            status["key_busy"].r.eq(keys.busy),
            status["cause"].r.eq(exc.cause),
            regs["EXC_ADDR"]["addr"].r.eq(exc.addr),
            regs["EXC_TILE"]["tile"].r.eq(exc.tile),
            regs["EXC_TILE"]["kind"].r.eq(exc.kind),
            regs["EXC_COUNT"]["count"].r.eq(exc.count),
            regs["DENIED"]["count"].r.eq(denied),
            regs["RD_BUSY"]["ctx"].r.eq(park.busy),
            self.irq.eq(status["exc"].q),
        ]
        return m

