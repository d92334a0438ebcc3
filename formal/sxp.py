"""``sxp`` (hw/sxp): key staging scrub, the trusted-mode lock, key non-interference, the region check.

What each property is proved on, and what it abstracts:

- ``key_stage_scrub`` (on the ``KeyStager`` component): its registers (the eight staging
  words, the holding register, the pending flags and context) have ordinary resets, so
  the scrub length is 0 cycles: in the first cycle after the reset they are all zero.
- ``trusted_lock``: ``SXP(contexts=2, lanes=1)`` as hw/sxp/core.py wires it (register file
  with the host/ccu permission hooks, ``TrustGate``, ``KeyStager``, ``ExceptionRecorder``,
  DENIED), with the five datapath blocks (the two ``Ingress``, ``ReadParking``, the two
  ``EnginePath``) replaced by :class:`formal.Stub` s whose outputs are free in every cycle (an
  over-approximation: sound for these safety checks). Checks: from the trust request on
  (``TrustGate.locked``) and in trusted mode no configuration field changes, whatever either
  port writes, so the configuration in force in trusted mode is the one checked on entry; a
  host read returns zero; STATUS.exc changes only by the hardware or a ccu
  write-1-to-clear; the strobes of KEY_W0..7, KEY_COMMIT and CTRL come from the ccu port
  only; with the ccu idle the staged key does not change; trusted mode stays on; DENIED
  counts exactly the refused accesses (host: every register access while locked; ccu: a
  configuration write while locked). By k-induction.
- ``trusted_entry`` (on ``TrustGate`` with a constant configuration): trusted mode rises only
  when the configuration is consistent by :func:`spec_consistent` (written here from
  docs/sxp.md, not from TrustGate's pipeline). Proof by window (see the function).
- ``key_slots_write_only``: a miter of two SXPs that see the same inputs except the data
  written to KEY_W0..7 (free in each copy, on both ports), from one arbitrary initial state
  (every register but the key staging equal in the first cycle). The register file, the
  control blocks and the core's wiring are the real ones; the blocks in ``MITER_DATAPATH``
  (all five datapath blocks: a miter with the real ingresses and read parking did not finish
  4 BMC steps in 15 minutes) are replaced in both copies by stubs driven by the SAME
  free values, so the engine is abstracted as "any behaviour, the same in both copies": any
  difference at an output must come from a path outside the engine. Checks, every cycle:
  every output (``pcie_o``, ``xb_o``, ``xb_i.ready``, ``pcie_i.ready``, both ports' read
  data, ``irq``) is equal in the two copies, key slots read zero, every hardware source of a
  read field and every flip-flop except the staging words and the holding register are
  equal. By k-induction. (The key does change what a real engine does — a wrong key fails a
  tag — which the shared stubs leave out on purpose.)
  The engine paths' own logic (skid buffer, meta FIFO, output mux) is inside the stub, so
  it is not covered: a miter with only ``gcm_core`` stubbed would need the two meta FIFOs'
  memories to start equal, and the flip-flop walk cannot name memory words.
- ``region_check`` (on ``Ingress(requests=True, contexts=2, lanes=1)``, every 32-bit address,
  11-bit length and configuration, the configuration constant): a request's first beat is
  decided "passes" only if it lies entirely in its region, and an in-region request is never
  refused for its region or map — the spec (:func:`spec_route`) follows KXBCTXMAP ->
  KPHYSMAP -> KSEL_BASE/KSEL_LIMIT with ``end = addr + length`` in 33 bits; every beat that
  leaves carries a header in its region and the physical context the spec names; each check
  stage holds what the spec says of its beat. By k-induction.
"""
import re

from amaranth.asserts import AnySeq
from amaranth.hdl import Cat, Const, Mux, Signal, Value
from amaranth.lib import data, wiring

from hw.csr import Access
from hw.sxp import SXP
from hw.sxp.control import KeyStager, TrustGate
from hw.sxp.ingress import Ingress
from hw.sxp.packet import Header, Kind
from hw.sxp.regs import ADDR_KEY, ADDR_KEY_COMMIT, KEY_WORDS, REGIONS, XBCTX_ENTRIES, Cause, is_config_register

from . import Harness, Property, Stub, discard, free_inputs, freeze, registers, with_mutants
from .aes import scrub_checks

__all__ = ["PROPERTIES", "control_plane", "register_file", "spec_consistent", "spec_route"]

CONTEXTS, LANES = 2, 1
DATAPATH = ("requests", "completions", "parking", "engine_w", "engine_r")
ENGINES = ("engine_w", "engine_r")
MITER_DATAPATH = DATAPATH          # the blocks key_slots_write_only replaces by shared stubs
KEY_ADDRS = [ADDR_KEY + 4 * k for k in range(KEY_WORDS)] + [ADDR_KEY_COMMIT]


# ---------------------------------------------------------------- specs (from docs/sxp.md)
def spec_consistent(kphysmap, base, limit):
    """docs/sxp.md, "Registers and trusted mode": every KPHYSMAP entry names a region 1..16,
    no two the same, and the 17 regions [base, limit) are pairwise disjoint, an empty one
    (limit <= base) overlapping nothing. Two non-empty half-open intervals are disjoint iff
    one ends at or before the other starts."""
    terms = [(r >= 1) & (r <= REGIONS - 1) for r in kphysmap]
    terms += [kphysmap[a] != kphysmap[b] for a in range(len(kphysmap)) for b in range(a + 1, len(kphysmap))]
    for i in range(REGIONS):
        for j in range(i + 1, REGIONS):
            empty = (limit[i] <= base[i]) | (limit[j] <= base[j])
            terms.append(empty | (limit[i] <= base[j]) | (limit[j] <= base[i]))
    return Cat(*terms).all()


def spec_route(hdr, kxbctxmap, kphysmap, base, limit, contexts):
    """``(reaches, phys)`` of a request header by docs/sxp.md: an aes request goes through
    KXBCTXMAP[xbctx] = phys (< contexts) and KPHYSMAP[phys] = region (1..16); a clear one uses
    region 0; it reaches (phys, or the clear path) iff base[region] <= addr and
    addr + length <= limit[region], the sum taken over the integers (33 bits here)."""
    lo, hi, map_ok, phys = _bounds(hdr, kxbctxmap, kphysmap, base, limit, contexts)
    end = hdr.addr.as_unsigned() + hdr.length.as_unsigned()         # 33 bits: no wrap
    inside = (hdr.addr >= lo) & (end <= hi)
    return Mux(hdr.aes, map_ok & inside, inside), phys


def spec_malformed(hdr, last, lanes=LANES):
    """docs/sxp.md, "Checks" 1: a request's header is MALFORMED when its kind is not
    WRITE_REQ/READ_REQ, its address is not on a beat, a write's length is not 1..256 bytes
    in whole beats, a read's not 1..1024 bytes in whole beats, or a read is not one beat
    (*last* on its first beat)."""
    beat = 16 * lanes
    whole = (hdr.length % beat == 0) & (hdr.length != 0) & (hdr.addr % beat == 0)
    write_ok = (hdr.kind == Kind.WRITE_REQ) & whole & (hdr.length <= 256)
    read_ok = (hdr.kind == Kind.READ_REQ) & whole & (hdr.length <= 1024) & last
    return ~(write_ok | read_ok)


def _bounds(hdr, kxbctxmap, kphysmap, base, limit, contexts):
    """(base, limit, map ok, phys) of the region a request header selects: region 0 for a
    clear request, KPHYSMAP[KXBCTXMAP[xbctx]] for an aes one (map ok: phys < contexts and the
    region in 1..16)."""
    phys = _select(kxbctxmap, hdr.xbctx)
    phys_ok = phys < contexts
    region = Mux(phys_ok, _select(kphysmap, phys), 0)
    map_ok = phys_ok & (region >= 1) & (region <= REGIONS - 1)
    sel = Mux(hdr.aes, region, 0)
    return _select(base, sel), _select(limit, sel), map_ok, phys


def _select(values, index):
    """``values[index]`` for a Python list of Values (0 past its end)."""
    out = Const(0, max(len(Value.cast(v)) for v in values))
    for k, v in enumerate(values):
        out = Mux(index == k, v, out)
    return out


# ---------------------------------------------------------------- building blocks
def control_plane(contexts=CONTEXTS, lanes=LANES, *, stub=DATAPATH, trust=None, keys=None, sxp_mutant=None,
                  drivers=None):
    """An SXP whose blocks named in *stub* are :class:`Stub` s (with shared *drivers*
    ``{block: {path: signal}}`` if given). *trust* / *keys* /
    *sxp_mutant*: a mutant name for the TrustGate / KeyStager / SXP. Returns ``(sxp, frozen,
    fragment, register_file)``."""
    sxp = SXP(contexts, lanes, _formal_mutant=sxp_mutant)
    for name in stub:
        block = getattr(sxp, name)
        discard(block)
        setattr(sxp, name, Stub(block.signature, None if drivers is None else drivers[name]))
    if trust is not None:
        discard(sxp.trust)
        sxp.trust = TrustGate(contexts, _formal_mutant=trust)
    if keys is not None:
        discard(sxp.keys)
        sxp.keys = KeyStager(contexts, _formal_mutant=keys)
    frozen, fragment = freeze(sxp)
    return sxp, frozen, fragment, register_file(fragment)


def register_file(fragment):
    """The :class:`hw.csr.RegisterFile` instance the SXP elaborated (its subfragment
    ``regs``)."""
    for sub, name, _ in fragment.subfragments:
        if name == "regs":
            return sub.origins[0]
    raise RuntimeError("the SXP has no submodule named regs")


def _fields(rf, *access):
    for reg in rf.regmap:
        for f in reg.fields:
            if f.access in access:
                yield reg, f, rf[reg.name][f.name]


def _writes(bus, reg):
    return bus.w_stb & (bus.addr == reg.addr)


def _mapped(bus, regmap):
    return Cat(*(bus.addr == r.addr for r in regmap)).any()


def _config(rf):
    """The configuration as the register file holds it: (kxbctxmap, kphysmap, base, limit)."""
    n = len([r for r in rf.regmap if r.name.startswith("KPHYSMAP")])
    return ([rf[f"KXBCTXMAP{i}"]["phys"].q for i in range(XBCTX_ENTRIES)],
            [rf[f"KPHYSMAP{p}"]["region"].q for p in range(n)],
            [rf[f"KSEL_BASE{r}"]["addr"].q for r in range(REGIONS)],
            [rf[f"KSEL_LIMIT{r}"]["addr"].q for r in range(REGIONS)])


# ---------------------------------------------------------------- key staging scrub
def key_stage_scrub(mutant=None):
    h = Harness()
    dut = KeyStager(CONTEXTS, _formal_mutant=mutant)
    frozen, fragment = freeze(dut)
    h.m.submodules.dut = frozen
    free_inputs(h.m, dut)
    scrub_checks(h, fragment, 0, lambda p, s: True, lambda p, s: 0,
                 {"staged key words": r"^key_stage\d$", "held key": r"^key_held$"})
    return h


def key_delivery(mutant=None):
    """The KeyStager delivers exactly the key that was staged, once to each engine: the
    harness keeps its own copy of the eight staging words (written by ``word_stb``, zeroed
    by an accepted commit, which wins over a word written in the same cycle), of the key
    and context a commit takes (a commit while ``busy`` is ignored) and of which engine
    still has to take it. ``key_w``/``key_r`` offer the committed key and context exactly
    until their engine takes it; ``busy`` is high exactly while one of them waits; the
    holding register is zero when nothing waits."""
    h = Harness()
    dut = KeyStager(CONTEXTS, _formal_mutant=mutant)
    frozen, _fragment = freeze(dut)
    h.m.submodules.dut = frozen
    free_inputs(h.m, dut)
    words = [Signal(len(dut.stage[k]), name=f"spec_stage{k}") for k in range(len(dut.stage))]
    held = Signal(len(dut.held), name="spec_held")
    ctx = Signal(len(dut.key_w.payload.ctx), name="spec_ctx")
    wait_w, wait_r = Signal(name="spec_wait_w"), Signal(name="spec_wait_r")
    busy = wait_w | wait_r
    commit = dut.commit_stb & ~busy
    with h.m.If(wait_w & dut.key_w.ready):
        h.m.d.sync += wait_w.eq(0)
    with h.m.If(wait_r & dut.key_r.ready):
        h.m.d.sync += wait_r.eq(0)
    for k, word in enumerate(words):
        with h.m.If(commit):
            h.m.d.sync += word.eq(0)
        with h.m.Elif(dut.word_stb[k]):
            h.m.d.sync += word.eq(dut.word_data[k])
    with h.m.If(commit):
        h.m.d.sync += [held.eq(Cat(*words)), ctx.eq(dut.commit_ctx), wait_w.eq(1), wait_r.eq(1)]
    h.check("busy_while_waiting", dut.busy == busy)
    # (the staging words themselves: an invariant the induction needs)
    h.check("stage_as_written", Cat(*dut.stage) == Cat(*words))
    for name, port, wait in (("w", dut.key_w, wait_w), ("r", dut.key_r, wait_r)):
        h.check(f"offer_{name}", port.valid == wait)
        h.check(f"key_{name}_as_staged", (port.payload.key == held) & (port.payload.ctx == ctx), guard=wait)
    h.check("held_zero_when_idle", dut.held == 0, guard=~busy)
    h.notes.append(f"KeyStager(contexts={CONTEXTS}); every input free")
    return h


# ---------------------------------------------------------------- trusted-mode lock
TRUST_MUTANTS = {"unlock"}


def trusted_lock(mutant=None):
    h = Harness()
    sxp, frozen, fragment, rf = control_plane(trust=mutant if mutant in TRUST_MUTANTS else None,
                                              sxp_mutant=None if mutant in TRUST_MUTANTS else mutant)
    h.m.submodules.sxp = frozen
    free_inputs(h.m, sxp)
    host, ccu = sxp.host, sxp.ccu
    trusted, locked = sxp.trust.trusted, sxp.trust.locked
    now = ~h.rst
    # the previous cycle
    was = h.past(trusted & now, "was_trusted")
    was_locked = h.past(locked & now, "was_locked")
    host_read = h.past(host.r_stb, "host_read_prev")
    ccu_w = {name: h.past(getattr(ccu, name), f"ccu_{name}_prev")
             for name in ("w_stb", "addr", "w_data")}
    h.check("trusted_stays", trusted, guard=was)
    h.check("host_read_zero", host.r_data == 0, guard=was & host_read)
    # the configuration is frozen from the request on (what trusted_entry shows consistent at the
    # rise is what stays in force)
    for reg, f, port in _fields(rf, Access.RW):
        prev = h.past(port.q, f"{reg.name}_{f.name}_prev")
        h.check(f"cfg_{reg.name}_{f.name}", port.q == prev, guard=was | was_locked)
    for reg, f, port in _fields(rf, Access.W1C):
        prev = h.past(port.q, f"{reg.name}_{f.name}_prev")
        hw_set = h.past(port.set, f"{reg.name}_{f.name}_set_prev")
        hit = ccu_w["w_stb"] & (ccu_w["addr"] == reg.addr)
        clear = Mux(hit, ccu_w["w_data"][f.offset:f.offset + f.width], 0)
        h.check(f"w1c_{reg.name}_{f.name}", port.q == ((prev & ~clear) | hw_set), guard=was)
    for reg, f, port in _fields(rf, Access.W):
        ccu_hit = _writes(ccu, reg)
        h.check(f"stb_{reg.name}_{f.name}", port.stb == ccu_hit, guard=trusted & now)
        h.check(f"data_{reg.name}_{f.name}",
                port.data == ccu.w_data[f.offset:f.offset + f.width], guard=trusted & now & ccu_hit)
    ccu_idle = ~ccu_w["w_stb"]
    stage = Cat(*sxp.keys.stage)
    stage_prev = h.past(stage, "key_stage_prev")
    held_prev = h.past(sxp.keys.held, "key_held_prev")
    h.check("key_stage_kept", stage == stage_prev, guard=was & ccu_idle)
    h.check("key_held_kept_or_cleared", (sxp.keys.held == held_prev) | (sxp.keys.held == 0),
            guard=was & ccu_idle)
    # DENIED counts every refused access: the host's while locked, the ccu's config writes while locked
    regmap = sxp.regmap
    config_addr = Cat(*(ccu.addr == r.addr for r in regmap if is_config_register(r))).any()
    host_refused = locked & (host.w_stb | host.r_stb) & _mapped(host, regmap)       # one per port and cycle
    ccu_refused = locked & ccu.w_stb & config_addr
    expect = h.past(rf["DENIED"]["count"].r + host_refused + ccu_refused, "denied_expected")
    h.check("denied_counts", rf["DENIED"]["count"].r == expect[:32], guard=h.past(now, "no_reset_prev"))
    h.notes.append(f"SXP(contexts={CONTEXTS}, lanes={LANES}) with stubbed datapath blocks "
                   f"{', '.join(DATAPATH)}; trusted = sxp.trust.trusted, locked = sxp.trust.locked")
    return h


# ---------------------------------------------------------------- entering trusted mode
def trusted_entry(mutant=None):
    """Trusted mode rises only with a configuration consistent by :func:`spec_consistent`, on
    the ``TrustGate`` component with a constant configuration (``AnyConst``).

    No reset: the first cycle is any state of TrustGate with ``trusted`` = 0 and no request
    pending (its compare registers and ``cfg_ok`` arbitrary). Every execution that enters
    trusted mode has a last cycle in that set before it (the cycle of the request that
    succeeds: ``trusted`` can only rise three cycles after a request taken while nothing was
    pending), and from there trusted mode rises in step 4; TrustGate's compares sample the
    configuration from the cycle after the request on, in which the SXP refuses every write to
    it (trusted_lock), so a constant configuration is what it sees in the SXP. A BMC of 7 steps
    that checks "trusted implies consistent" in each of them therefore covers every entry into
    trusted mode: a proof by window, as the scrub properties are. The same window holds the
    decision itself, checked against the harness's own three-cycle account of the request
    (docs/sxp.md): trusted rises exactly after a request decided on a consistent
    configuration, ``refused`` pulses exactly for one decided on an inconsistent one, and
    ``locked`` is high from the request on."""
    h = Harness(reset=False)
    dut = TrustGate(CONTEXTS, _formal_mutant=mutant)
    frozen, fragment = freeze(dut)
    h.m.submodules.dut = frozen
    kp = [h.any_const(5, f"kphysmap{p}") for p in range(CONTEXTS)]
    base = [h.any_const(32, f"base{r}") for r in range(REGIONS)]
    limit = [h.any_const(32, f"limit{r}") for r in range(REGIONS)]
    h.m.d.comb += [dut.kphysmap[p].eq(kp[p]) for p in range(CONTEXTS)]
    h.m.d.comb += [dut.base[r].eq(base[r]) for r in range(REGIONS)]
    h.m.d.comb += [dut.limit[r].eq(limit[r]) for r in range(REGIONS)]
    h.m.d.comb += dut.request.eq(h.any_seq(1, "request"))
    pending = dict(registers(fragment))["pending"]
    h.assume(~h.first | (~dut.trusted & (pending == 0)))
    consistent = Signal(name="spec_consistent")
    h.m.d.comb += consistent.eq(spec_consistent(kp, base, limit))
    h.check("trusted_config_consistent", consistent, guard=dut.trusted)
    # the decision as docs/sxp.md gives it: a request while not trusted and none pending is
    # decided three cycles later: trusted rises (and stays) if the configuration is
    # consistent, else refused pulses; no other cycle refuses, trusted rises no other way
    asked = Signal(3, name="spec_pending")
    h.assume(~h.first | (asked == 0))
    take = dut.request & ~dut.trusted & (asked == 0)
    h.m.d.sync += asked.eq(Cat(take, asked[:2]))
    decide = asked[2]
    h.check("refused_iff_inconsistent", dut.refused == (decide & ~consistent))
    trusted_prev = h.past(dut.trusted, "trusted_prev")
    accepted_prev = h.past(decide & consistent, "accepted_prev")
    h.check("trusted_as_decided", dut.trusted == (trusted_prev | accepted_prev))
    h.check("locked_from_request", dut.locked == (dut.trusted | (asked != 0)))
    h.notes.append(f"TrustGate(contexts={CONTEXTS}); configuration AnyConst; no reset, first cycle: "
                   "trusted = 0, pending = 0, everything else arbitrary")
    return h


# ---------------------------------------------------------------- key non-interference
def _datapath_signatures():
    sxp = SXP(CONTEXTS, LANES)
    discard(sxp)
    return {name: getattr(sxp, name).signature for name in DATAPATH}


def _shared(m, signatures):
    drivers = {name: Stub.shared_drivers(sig, name) for name, sig in signatures.items()}
    for block in drivers.values():
        for value in block.values():
            value = Value.cast(value)
            m.d.comb += value.eq(AnySeq(len(value)))
    return drivers


KEY_MUTANTS = {"leak"}              # KeyStager's; the others are the SXP's


def key_slots_write_only(mutant=None):
    """Two SXPs (a miter) differing only in the data written to KEY_W0..7; each engine path is
    a stub driven by the same free values in both copies."""
    h = Harness()
    m = h.m
    # every datapath block a stub with the same free outputs in both copies: the miter with the
    # real ingresses and read parking did not finish 4 BMC steps in 15 minutes on the shared
    # machine (MITER_DATAPATH names what is stubbed)
    blocks = _datapath_signatures()
    kw = {"stub": MITER_DATAPATH, "drivers": _shared(m, {name: blocks[name] for name in MITER_DATAPATH})}
    kw.update(keys=mutant if mutant in KEY_MUTANTS else None,
              sxp_mutant=None if mutant in KEY_MUTANTS else mutant)
    a, fa, frag_a, rf_a = control_plane(**kw)
    b, fb, frag_b, rf_b = control_plane(**kw)
    m.submodules.a, m.submodules.b = fa, fb
    free_inputs(m, a)
    key_w = [a.regmap[f"KEY_W{k}"].addr for k in range(KEY_WORDS)]
    slots = key_w + [a.regmap["KEY_COMMIT"].addr]
    assert slots == KEY_ADDRS, "the key slot addresses moved"
    # copy b sees the same inputs as copy a, except the data of a write to a key slot
    for path, member, value in a.signature.flatten(a):
        if member.flow != wiring.In:
            continue
        other = b
        for step in path:
            other = getattr(other, step)
        if path[-1] == "w_data":
            to_key = Cat(*(getattr(a, path[0]).addr == k for k in key_w)).any()
            free = Signal(len(Value.cast(value)), name=f"{path[0]}_key_data_b")
            m.d.comb += [free.eq(AnySeq(len(free))), other.eq(Mux(to_key, free, value))]
        else:
            m.d.comb += other.eq(value)
    # no output depends on the key data: every output port of the SXP, in every cycle
    for path, member, value in a.signature.flatten(a):
        if member.flow != wiring.Out:
            continue
        other = b
        for step in path:
            other = getattr(other, step)
        h.check("out_" + "_".join(map(str, path)), Value.cast(value) == Value.cast(other))
    for port in ("host", "ccu"):
        bus = getattr(a, port)
        slot_read = h.past(~h.rst & bus.r_stb & Cat(*(bus.addr == k for k in slots)).any(),
                           f"{port}_slot_read_prev")
        h.check(f"{port}_key_slot_reads_zero", bus.r_data == 0, guard=slot_read)
    # the hardware sources of every read field
    for (reg, f, pa), (_, _, pb) in zip(_fields(rf_a, Access.R), _fields(rf_b, Access.R)):
        h.check(f"src_{reg.name}_{f.name}", pa.r == pb.r)
    # every flip-flop of the two copies is equal except the key staging registers: the key
    # data reaches nothing else (with the engine paths stubbed this makes the induction close)
    regs_b = dict(registers(frag_b))
    key_regs = re.compile(r"^keys\.(key_stage\d+|key_held)$")
    kept = []
    for path, sig in registers(frag_a):
        if key_regs.match(path):
            kept.append(path)
            continue
        # the two copies start from one arbitrary state (the reset-less data registers too):
        # two runs of one chip that differ only in the key written
        h.assume(~h.first | (sig == regs_b[path]))
        h.check("eq_" + path.replace(".", "__").replace("#", "_"), sig == regs_b[path])
    if len(kept) != KEY_WORDS + 1:
        raise RuntimeError(f"expected the {KEY_WORDS} staging words and the held key, found {kept}")
    h.notes.append(f"registers allowed to differ between the copies: {', '.join(kept)}")
    h.notes.append("miter: two SXPs with real ingresses, read parking, registers, control; each EnginePath "
                   "a stub driven by the same free values in both; the same inputs except w_data of "
                   "writes to KEY_W0..7")
    return h


# ---------------------------------------------------------------- region check
def _named(fragment, name):
    """The one signal called *name* that *fragment* (not its submodules) assigns."""
    found = []
    for stmts in fragment.statements.values():
        found += [s for s in stmts._lhs_signals() if s.name == name and not any(s is f for f in found)]
    if len(found) != 1:
        raise RuntimeError(f"{len(found)} signals named {name!r}")
    return found[0]


def _request_ingress(h, mutant):
    """``(dut, fragment, (kx, kp, base, limit))``: the request Ingress in *h* with every
    input free but a constant configuration (any one: consistent or not)."""
    m, n = h.m, CONTEXTS
    dut = Ingress(requests=True, contexts=n, lanes=LANES, _formal_mutant=mutant)
    frozen, fragment = freeze(dut)
    m.submodules.dut = frozen
    cfg = {"kxbctxmap": dut.kxbctxmap, "kphysmap": dut.kphysmap, "base": dut.base, "limit": dut.limit}
    free_inputs(m, dut, skip={(k,) for k in cfg})
    kx = [h.any_const(4, f"kxbctxmap{i}") for i in range(XBCTX_ENTRIES)]
    kp = [h.any_const(5, f"kphysmap{p}") for p in range(n)]
    base = [h.any_const(32, f"base{r}") for r in range(REGIONS)]
    limit = [h.any_const(32, f"limit{r}") for r in range(REGIONS)]
    for i in range(XBCTX_ENTRIES):
        m.d.comb += dut.kxbctxmap[i].eq(kx[i])
    for p in range(n):
        m.d.comb += dut.kphysmap[p].eq(kp[p])
    for r in range(REGIONS):
        m.d.comb += [dut.base[r].eq(base[r]), dut.limit[r].eq(limit[r])]
    return dut, fragment, (kx, kp, base, limit)


def ingress_payload(mutant=None):
    """Every beat the request Ingress hands on carries the data of the input beat at the
    same place of the same packet (or zero: a pad beat, a beat of a mis-framed packet, a
    read request), and a write leaves as exactly length / beat bytes beats, a read request
    as one. The tiles label their beats: each carries its byte address (the packet's
    ``addr`` plus 16 · lanes per beat before it) in every 32-bit word, XORed with a
    constant the solver chooses; packets are delimited by ``last`` as the Ingress does.
    Everything else is free: headers, lengths, framing, back-pressure, the reset, the
    configuration (constant)."""
    h = Harness()
    m = h.m
    dut, _fragment, _cfg = _request_ingress(h, mutant)
    width = len(dut.i.payload.data)
    mask = h.any_const(width, "data_mask")
    beat_bytes = 16 * LANES

    def label(addr):
        return Cat(*([addr[:32]] * (width // 32))) ^ mask

    ip = dut.i.payload
    in_mid = Signal(name="in_packet")
    in_base = Signal(32, name="in_base")
    in_idx = Signal(8, name="in_beat")
    base_now = Mux(in_mid, in_base, ip.hdr.addr)
    idx_now = Mux(in_mid, in_idx, 0)
    # the sender's `last` shows in the data too (XOR a second constant), so that a beat whose
    # `last` is not where length / beat bytes ends the packet cannot leave with its data
    last_mark = h.any_const(width, "last_mark")
    h.assume(~dut.i.valid | (ip.data == label(base_now + idx_now * beat_bytes) ^ Mux(ip.last, last_mark, 0)))
    # the header's tile is labelled too: a function of its address (an XOR with a constant),
    # so that a tile that is not the packet's shows
    tile_mask = h.any_const(len(ip.hdr.tile), "tile_mask")

    def tile_of(hdr):
        return hdr.addr[4:4 + len(hdr.tile)] ^ tile_mask
    h.assume(~dut.i.valid | in_mid | (ip.hdr.tile == tile_of(ip.hdr)))
    with m.If(dut.i.valid & dut.i.ready):
        m.d.sync += [in_mid.eq(~ip.last), in_base.eq(base_now), in_idx.eq(idx_now + 1)]
    o = dut.o.payload
    out_base = Signal(32, name="out_base")
    out_idx = Signal(8, name="out_beat")
    o_base = Mux(o.meta.first, o.meta.hdr.addr, out_base)
    o_idx = Mux(o.meta.first, 0, out_idx)
    with m.If(dut.o.valid & dut.o.ready):
        m.d.sync += [out_base.eq(o_base), out_idx.eq(o_idx + 1)]
    shift = beat_bytes.bit_length() - 1
    beats = o.meta.hdr.length >> shift
    write = o.meta.hdr.kind == Kind.WRITE_REQ
    # a beat that leaves with data is a well-framed one: its sender's `last` is set exactly
    # on beat length / beat bytes - 1 of a write (a read request is one beat)
    framed_last = Mux(write, o_idx + 1 == beats, 1)
    expect = Mux(o.meta.zero | o.meta.read, 0, label(o_base + o_idx * beat_bytes) ^ Mux(framed_last, last_mark, 0))
    h.check("beat_data_intact", o.data == expect, guard=dut.o.valid & ~h.rst)
    h.check("header_tile_intact", o.meta.hdr.tile == tile_of(o.meta.hdr), guard=dut.o.valid & ~h.rst)
    # the first zeroed beat of a write is its framing error (pads come only after one): it
    # leaves with the MALFORMED event of its packet (docs/sxp.md: once per packet)
    zero_seen = Signal(name="zero_seen")
    seen = ~o.meta.first & zero_seen
    with m.If(dut.o.valid & dut.o.ready):
        m.d.sync += zero_seen.eq(seen | o.meta.zero)
    ev = dut.event
    h.check("framing_event", ev.valid & (ev.cause == Cause.MALFORMED) & (ev.addr == o.meta.hdr.addr),
            guard=dut.o.valid & dut.o.ready & write & o.meta.zero & ~seen & ~h.rst)
    # exactly length / beat bytes beats of a write leave, whatever the sender's `last` said
    # (docs/sxp.md: no byte outside the checked range), and one beat of a read request
    h.check("write_within_length", o_idx < beats, guard=dut.o.valid & write & ~h.rst)
    h.check("write_ends_at_length", o.meta.last == (o_idx + 1 == beats), guard=dut.o.valid & write & ~h.rst)
    h.check("read_one_beat", o.meta.last & (o_idx == 0), guard=dut.o.valid & ~write & ~h.rst)
    h.notes.append(f"Ingress(requests=True, contexts={CONTEXTS}, lanes={LANES}); beats labelled by address")
    return h


def region_check(mutant=None):
    h = Harness()
    n = CONTEXTS
    dut, fragment, (kx, kp, base, limit) = _request_ingress(h, mutant)

    def route(hdr):
        return spec_route(hdr, kx, kp, base, limit, n)

    # the framer's decision on a packet's first beat (cause_c, from C3 and the framing state)
    c1, c2, c3 = dut.check_layouts()
    regs = dict(registers(fragment))
    s = {k: data.View(lay, regs[f"s{k}"]) for k, lay in ((1, c1), (2, c2), (3, c3))}
    s_valid = {k: regs[f"s{k}_valid"] for k in (1, 2, 3)}
    take, first = _named(fragment, "take"), _named(fragment, "first")
    cause = _named(fragment, "cause_c")
    hin = s[3].beat.hdr
    decided = take & first
    ok_in, phys_in = route(hin)
    region_cause = (cause == Cause.MAP) | (cause == Cause.REGION) | (cause == Cause.CLEAR)
    h.check("passes_only_inside", ok_in, guard=decided & (cause == Cause.NONE))
    h.check("inside_never_refused", ~region_cause, guard=decided & ok_in)
    # every beat that leaves: its header lies in its region, key_index is the spec's context
    out = Header(dut.o.payload.meta.hdr)
    ok_out, phys_out = route(out)
    passes = dut.o.valid
    h.check("out_inside", ok_out, guard=passes)
    h.check("out_key_index", out.key_index == Mux(out.aes, phys_out, 0), guard=passes)
    h.check("out_ctx", dut.o.payload.ctx == phys_out, guard=passes & out.aes & (out.kind == Kind.WRITE_REQ))
    # the cause of the decision, in docs/sxp.md's order (MALFORMED header, MAP, MALFORMED
    # one-beat cc on a context with no open frame, REGION/CLEAR): the first failing check
    lo, hi, map_ok, phys = _bounds(hin, kx, kp, base, limit, n)
    end_in = hin.addr.as_unsigned() + hin.length.as_unsigned()
    inside = (hin.addr >= lo) & (end_in <= hi)
    one_beat_cc = (hin.kind != Kind.READ_REQ) & hin.aes & hin.cc & (hin.length == 16 * LANES) & \
        ~dut.open.bit_select(phys[:max(1, (n - 1).bit_length())], 1)
    spec_cause = Mux(spec_malformed(hin, s[3].beat.last), Cause.MALFORMED,
                     Mux(hin.aes & ~map_ok, Cause.MAP,
                         Mux(one_beat_cc, Cause.MALFORMED,
                             Mux(~inside, Mux(hin.aes, Cause.REGION, Cause.CLEAR), Cause.NONE))))
    h.check("cause_as_spec", cause == spec_cause, guard=decided)
    # each check stage holds what the spec says of its beat (the strengthening that makes the
    # induction close: a stalled stage keeps its beat and its results)
    for k in (1, 2, 3):
        h.check(f"s{k}_malformed", s[k].malformed == spec_malformed(s[k].beat.hdr, s[k].beat.last),
                guard=s_valid[k])
    for k in (1, 2):
        hdr = s[k].beat.hdr
        end = hdr.addr.as_unsigned() + hdr.length.as_unsigned()
        h.check(f"s{k}_end", s[k].end == end, guard=s_valid[k])
        h.check(f"s{k}_phys", s[k].phys == _select(kx, hdr.xbctx), guard=s_valid[k])
    ok3, phys3 = route(s[3].beat.hdr)
    lo2, hi2, map_ok2, _ = _bounds(s[2].beat.hdr, kx, kp, base, limit, n)
    h.check("s2_map", s[2].map_bad == ~map_ok2, guard=s_valid[2])
    h.check("s2_bounds", (s[2].base == lo2) & (s[2].limit == hi2),
            guard=s_valid[2] & (map_ok2 | ~s[2].beat.hdr.aes))
    h.check("s3_phys", s[3].phys == phys3, guard=s_valid[3])
    h.check("s3_verdict", (~s[3].outside & ~(s[3].beat.hdr.aes & s[3].map_bad)) == ok3, guard=s_valid[3])
    # (MAP and REGION apart, for the cause: the map result and the bounds each as the spec's)
    lo3, hi3, map_ok3, _ = _bounds(s[3].beat.hdr, kx, kp, base, limit, n)
    end3 = s[3].beat.hdr.addr.as_unsigned() + s[3].beat.hdr.length.as_unsigned()
    h.check("s3_map", s[3].map_bad == ~map_ok3, guard=s_valid[3])
    h.check("s3_outside", s[3].outside == ~((s[3].beat.hdr.addr >= lo3) & (end3 <= hi3)),
            guard=s_valid[3] & (map_ok3 | ~s[3].beat.hdr.aes))
    # the header latched on the first beat of a passing packet steers its later beats
    mode_q, hdr_q = regs["mode_q"], Header(regs["hdr_q"])
    mid = regs["mid"] | regs["pad"]
    ok_q, phys_q = route(hdr_q)
    h.check("latched_inside", ok_q & (hdr_q.key_index == Mux(hdr_q.aes, phys_q, 0)), guard=mid & (mode_q != 0))
    h.check("latched_ctx", regs["phys_q"] == phys_q, guard=mid & (mode_q == 1))     # GCM
    # (the mode latched with it is the header's: GCM 1 for an aes write, READ 3 for an aes read,
    # PASS 2 for a clear request)
    mode_of = Mux(hdr_q.aes, Mux(hdr_q.kind == Kind.READ_REQ, 3, 1), 2)
    h.check("latched_mode", mode_q == mode_of, guard=mid & (mode_q != 0))
    h.notes.append(f"Ingress(requests=True, contexts={n}, lanes={LANES}); configuration AnyConst; "
                   "spec: formal.sxp.spec_route (33-bit end)")
    return h



KEY_MUTANT_LIST = (
    ("key_to_pcie_o", "staging word 0 ORed onto pcie_o's data (the audit's planted bug)", "SXP._formal_mutant"),
    ("key_in_exc_addr", "the CONFIG exception records KEY_W0's write data as its address",
     "SXP._formal_mutant"),
    ("leak", "a staged key bit shows in STATUS.key_busy (a register read)", "KeyStager._formal_mutant"),
)

PROPERTIES = [
    *with_mutants(Property("sxp", "key_delivery", key_delivery, depth=6, induction=1,
                           params={"component": "KeyStager", "contexts": CONTEXTS},
                           doc="the key offered to each engine is the one staged, with the commit's "
                               "context, until that engine takes it; busy exactly meanwhile; a commit "
                               "clears the staging words; the holding register is zero when idle"),
                  ("stage_kept", "a commit leaves the staged words in place", "KeyStager._formal_mutant")),
    *with_mutants(Property("sxp", "key_stage_scrub", key_stage_scrub, depth=3, window=True,
                           params={"component": "KeyStager", "contexts": CONTEXTS},
                           doc="KeyStager: staging words, held key, flags are zero in the first cycle "
                               "after reset (ordinary resets: scrub length 0)"),
                  ("keep_held", "the holding register has no reset")),
    *with_mutants(Property("sxp", "trusted_entry", trusted_entry, depth=7, window=True, fast=False,
                           params={"component": "TrustGate", "contexts": CONTEXTS},
                           doc="trusted mode rises only with a configuration consistent by the spec "
                               "(KPHYSMAP 1..16 and distinct, the 17 regions pairwise disjoint); a "
                               "request is decided 3 cycles later: trusted if consistent, else refused; "
                               "locked from the request on"),
                  ("no_cfg_ok", "TrustGate decides without cfg_ok", "TrustGate._formal_mutant"),
                  ("skip_region16", "TrustGate's disjointness compares stop one region short",
                   "TrustGate._formal_mutant")),
    *with_mutants(Property("sxp", "trusted_lock", trusted_lock, depth=6, induction=2, fast=False,
                           params={"contexts": CONTEXTS, "lanes": LANES, "datapath": "stubbed"},
                           doc="from the trust request on the configuration is frozen for both ports; "
                               "host reads return 0; STATUS.exc, key strobes and staging change only by the "
                               "ccu port; DENIED counts the refusals; trusted mode stays"),
                  ("unlock", "TrustGate.locked forgets trusted", "TrustGate._formal_mutant"),
                  ("ccu_writes_limit", "a ccu write to KSEL_LIMIT is applied in trusted mode", "SXP._formal_mutant"),
                  ("host_reads_kxbctxmap", "the host may read KXBCTXMAP in trusted mode", "SXP._formal_mutant")),
    *with_mutants(Property("sxp", "key_slots_write_only", key_slots_write_only, depth=3,
                           depth_reason="a KEY_W write in step 1 is in the staging words in step 2, where a "
                                        "path from them to an output, a read field or another register "
                                        "shows; step 3 did not finish in 20 minutes on the 2-core machine",
                           params={"contexts": CONTEXTS, "lanes": LANES, "datapath": "shared stubs",
                                   "copies": 2},
                           doc="miter: no output (pcie_o, xb_o, readies, read data, irq), read-field source "
                               "or flip-flop outside the key staging depends on the data written to KEY_W0..7"),
                  *KEY_MUTANT_LIST),
    *with_mutants(Property("sxp", "region_check", region_check, depth=8, induction=2, fast=False,
                           params={"component": "Ingress(requests)", "contexts": CONTEXTS, "lanes": LANES},
                           doc="a request passes iff it lies in the region KXBCTXMAP -> KPHYSMAP -> KSELLIMIT "
                               "maps it to (33-bit end); its beats carry that context"),
                  ("drop_carry", "end = addr + length kept mod 2**32", "Ingress._formal_mutant"),
                  ("limit_lt", "end < limit instead of end <= limit", "Ingress._formal_mutant"),
                  ("read_multi_beat", "a read request of several beats is not MALFORMED",
                   "Ingress._formal_mutant")),
    *with_mutants(Property("sxp", "ingress_payload", ingress_payload, depth=10, fast=False,
                           params={"component": "Ingress(requests)", "contexts": CONTEXTS, "lanes": LANES},
                           depth_reason="10 steps: a beat taken in step 1 leaves the framer in step 5 at "
                                        "the earliest (skid buffer, check stages C1-C3); two 2-beat "
                                        "packets back to back leave by step 8, with back-pressure before",
                           doc="every beat handed on carries the data of the input beat at its place in "
                               "its packet, or zero (pad, mis-framed, read); a write leaves as length / beat "
                               "bytes beats, a read as one; beats labelled by address"),
                  ("data_early", "a beat leaves with the data of the beat behind it", "Ingress._formal_mutant"),
                  ("no_framing_error", "a write whose `last` is not at length / beat bytes is not mis-framed",
                   "Ingress._formal_mutant"),
                  ("no_framing_event", "a mis-framed write raises no MALFORMED event", "Ingress._formal_mutant"),
                  ("end_by_last", "a write ends at the sender's last, not after length / beat bytes",
                   "Ingress._formal_mutant")),
]
