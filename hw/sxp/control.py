"""The SXP's control components: :class:`KeyStager` (write-only key slots into both
engines), :class:`TrustGate` (entering trusted mode) and :class:`ExceptionRecorder`
(registered exception events → sticky record, count, ``irq``)."""
from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from hw.common import add
from hw.gcm.layout import CTX_BITS, KEY_BITS, key_layout

from .ingress import event_layout
from .packet import TILE_BITS
from .regs import KEY_WORDS, REGION_BITS, REGIONS, Cause

__all__ = ["KeyStager", "TrustGate", "ExceptionRecorder"]

WORD_BITS = KEY_BITS // KEY_WORDS


class KeyStager(wiring.Component):
    """``KEY_W0..7`` strobes fill a staging register; ``KEY_COMMIT`` moves it into a holding
    register (staging zeroed) and offers it to both engines at once (``key_w``, ``key_r``),
    so a key is installed once and serves both directions. The holding register is zeroed
    when both engines have taken it; ``busy`` meanwhile (a commit while busy is ignored).
    Every register here resets to zero: no key survives a reset."""

    def __init__(self, contexts, *, _formal_mutant=None):
        # test-only seeded bugs for formal/sxp.py (never set in a design): "keep_held" (the
        # holding register has no reset), "leak" (a staged key bit shows in ``busy``),
        # "stage_kept" (a commit leaves the staged words in place)
        if _formal_mutant not in (None, "keep_held", "leak", "stage_kept"):
            raise ValueError(f"unknown _formal_mutant {_formal_mutant!r}")
        self._formal_mutant = _formal_mutant
        super().__init__({
            "word_stb": In(KEY_WORDS),
            "word_data": In(data.ArrayLayout(WORD_BITS, KEY_WORDS)),
            "commit_stb": In(1),
            "commit_ctx": In(CTX_BITS),
            "key_w": Out(stream.Signature(key_layout(contexts))),
            "key_r": Out(stream.Signature(key_layout(contexts))),
            "busy": Out(1),
        })
        # attributes so that testbenches can check the reset scrub
        self.stage = [Signal(WORD_BITS, name=f"key_stage{k}") for k in range(KEY_WORDS)]
        self.held = Signal(KEY_BITS, name="key_held", reset_less=_formal_mutant == "keep_held")

    def elaborate(self, platform):
        m = Module()
        ctx = Signal(CTX_BITS)
        pend_w, pend_r = Signal(), Signal()
        for k in range(KEY_WORDS):
            with m.If(self.word_stb[k]):
                m.d.sync += self.stage[k].eq(self.word_data[k])
        for port, pend in ((self.key_w, pend_w), (self.key_r, pend_r)):
            m.d.comb += [port.valid.eq(pend), port.payload.ctx.eq(ctx),
                         port.payload.key.eq(self.held)]
        left_w = pend_w & ~self.key_w.ready
        left_r = pend_r & ~self.key_r.ready
        m.d.sync += [pend_w.eq(left_w), pend_r.eq(left_r)]
        with m.If((pend_w | pend_r) & ~left_w & ~left_r):
            m.d.sync += [self.held.eq(0), ctx.eq(0)]
        busy = pend_w | pend_r
        if self._formal_mutant == "leak":
            busy = busy | self.stage[0][0]
        m.d.comb += self.busy.eq(busy)
        with m.If(self.commit_stb & ~self.busy):
            m.d.sync += [pend_w.eq(1), pend_r.eq(1), self.held.eq(Cat(*self.stage)),
                         ctx.eq(self.commit_ctx)]
            if self._formal_mutant != "stage_kept":
                m.d.sync += [s.eq(0) for s in self.stage]
        return m


def _split_lt(a, b):
    """``(a_hi < b_hi, a_hi == b_hi, a_lo < b_lo)`` of two 32-bit values: two 16-bit
    compares, registered by the caller and combined a cycle later."""
    return Cat(a[16:] < b[16:], a[16:] == b[16:], a[:16] < b[:16])


class TrustGate(wiring.Component):
    """Entering trusted mode (``CTRL.trust``) if the configuration is consistent: every
    KPHYSMAP entry in 1..16 and all distinct, the 17 regions pairwise disjoint (empty ones
    never overlap). Otherwise exception CONFIG (``refused`` pulses) and nothing changes.

    The consistency check is two register stages (the 289 region compares are split in
    16-bit halves, registered, combined and AND-reduced a cycle later): ``request`` in
    cycle t is decided in cycle t + 3 on the configuration as it was after the writes of
    cycle t. ``locked`` (host writes refused) rises with the request, so the host cannot
    change the configuration between the request and the decision; it falls again only if
    trust is refused. The SXP also refuses the ccu's configuration writes while ``locked``, so
    the configuration in force from the request on is the one checked."""

    def __init__(self, contexts, *, _formal_mutant=None):
        # test-only seeded bugs for formal/sxp.py (never set in a design): "unlock" (``locked``
        # forgets ``trusted``: the host port opens again after the decision), "no_cfg_ok" (the
        # decision ignores the check), "skip_region16" (the disjointness compares stop one
        # region short: region 16 may overlap any other)
        if _formal_mutant not in (None, "unlock", "no_cfg_ok", "skip_region16"):
            raise ValueError(f"unknown _formal_mutant {_formal_mutant!r}")
        self._formal_mutant = _formal_mutant
        self.contexts = contexts
        super().__init__({
            "kphysmap": In(data.ArrayLayout(REGION_BITS, contexts)),
            "base": In(data.ArrayLayout(32, REGIONS)),
            "limit": In(data.ArrayLayout(32, REGIONS)),
            "request": In(1),
            "trusted": Out(1),
            "locked": Out(1),
            "refused": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        n = self.contexts
        kp = [self.kphysmap[p] for p in range(n)]
        # stage 1: KPHYSMAP checks and the region compares in halves
        phys_ok = Signal()
        lt_parts = Signal(3 * REGIONS * REGIONS)
        m.d.sync += [
            phys_ok.eq(Cat(*[(r != 0) & (r <= REGIONS - 1) for r in kp],
                           *[kp[a] != kp[b] for a in range(n) for b in range(a + 1, n)]).all()),
            lt_parts.eq(Cat(*[_split_lt(self.base[i], self.limit[j])
                              for i in range(REGIONS) for j in range(REGIONS)])),
        ]
        # stage 2: combine the halves (base[i] < limit[j]) and reduce
        def lt(i, j):
            k = 3 * (i * REGIONS + j)
            return lt_parts[k] | (lt_parts[k + 1] & lt_parts[k + 2])
        nonempty = [lt(r, r) for r in range(REGIONS)]
        last = REGIONS - 1 if self._formal_mutant == "skip_region16" else REGIONS
        disjoint = [~(nonempty[i] & nonempty[j] & lt(i, j) & lt(j, i))
                    for i in range(last) for j in range(i + 1, last)]
        cfg_ok = Signal()
        m.d.sync += cfg_ok.eq(phys_ok & Cat(*disjoint).all())

        # request → decision three cycles later (the compares see the request cycle's writes
        # one cycle after it, cfg_ok one more)
        pending = Signal(3)
        start = self.request & ~self.trusted & ~pending.any()
        m.d.sync += pending.eq(Cat(start, pending[:2]))
        decide = pending[2]
        accept = decide if self._formal_mutant == "no_cfg_ok" else decide & cfg_ok
        with m.If(accept):
            m.d.sync += self.trusted.eq(1)
        locked = self.trusted | pending.any()
        if self._formal_mutant == "unlock":
            locked = pending.any()
        m.d.comb += [self.refused.eq(decide & ~cfg_ok), self.locked.eq(locked)]
        return m


class ExceptionRecorder(wiring.Component):
    """Exception events (one :data:`~hw.sxp.ingress.event_layout` per source, in priority
    order) are registered, then: each is counted (``count``, wrapping, a cycle after
    ``set``); the first one while ``STATUS.exc`` is clear latches cause, tile, address and
    kind; ``set`` sets ``STATUS.exc`` (which drives ``irq``)."""

    def __init__(self, sources):
        self.sources = sources
        super().__init__({
            "events": In(data.ArrayLayout(event_layout, sources)),
            "exc": In(1),
            "set": Out(1),
            "cause": Out(Cause),
            "tile": Out(TILE_BITS),
            "addr": Out(32),
            "kind": Out(2),
            "count": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        events = Signal(data.ArrayLayout(event_layout, self.sources))
        m.d.sync += events.eq(self.events)
        valid = Cat(*(events[k].valid for k in range(self.sources)))
        with m.If(~self.exc):
            for k in range(self.sources):
                with (m.If if k == 0 else m.Elif)(valid[k]):
                    e = events[k]
                    m.d.sync += [self.cause.eq(e.cause), self.tile.eq(e.tile),
                                 self.addr.eq(e.addr), self.kind.eq(e.kind)]
        # the events of a cycle are counted in a register of their own, then added: the
        # popcount and the 32-bit add in one cycle were the longest path of sxp_system_x4
        # (25 gate levels); EXC_COUNT follows STATUS.exc by one cycle
        new = Signal(range(self.sources + 1), name="new_count")
        m.d.sync += [new.eq(sum(valid[k] for k in range(self.sources))),
                     self.count.eq(add(m, self.count, new, 32, "count_add"))]
        m.d.comb += self.set.eq(valid.any())
        return m

