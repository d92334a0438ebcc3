"""``sxp`` (hw/sxp): key staging scrub, the trusted-mode lock, write-only key slots.

**What the SXP properties are proved on.** ``SXP(contexts=2, lanes=1)`` itself
(hw/sxp/core.py: its register file with the host/ccu permission hooks, ``TrustGate``,
``KeyStager``, ``ExceptionRecorder``, the DENIED counter, all wired as the RTL wires them),
with the five datapath blocks — the two ``Ingress``, ``ReadParking`` and the two
``EnginePath`` (each a ``gcm_core``) — replaced before elaboration by :class:`formal.Stub`
components of the same signature: their outputs (stream handshakes and payloads,
exception events, release/busy, ``key.ready``) are free in every cycle and their inputs
are ignored. That is an over-approximation: every behaviour of the real datapath is one
of the stub's, so a property proved here holds for the whole SXP (sound for safety
properties); it only loses properties that need the datapath to behave (none here).

- ``key_stage_scrub`` (on the ``KeyStager`` component): its registers (the eight staging
  words, the holding register, the pending flags and context) have ordinary resets, so
  the scrub length is 0 cycles: in the first cycle after the reset they are all zero.
- ``trusted_lock``: in a cycle where STATUS.trusted is set (and no reset): a host read
  returns zero in the next cycle; every configuration register (KXBCTXMAP, KPHYSMAP,
  KSEL_BASE, KSEL_LIMIT) changes exactly as the ccu port's write alone says (the host
  cannot change it), STATUS.exc only by the hardware or a ccu write-1-to-clear; the write
  strobes of KEY_W0..7, KEY_COMMIT and CTRL come from the ccu port only (with its data);
  with the ccu port idle the staging words do not change and the holding register only
  clears; and trusted mode stays on. By k-induction.
- ``key_slots_write_only``: a miter of two copies of the SXP that see the same inputs
  except the data of every write to a key slot (KEY_W0..7), which is free in each copy,
  and whose stubbed datapaths produce the same values. A read of KEY_W0..7 or KEY_COMMIT
  returns zero on both ports; both ports' read data, ``irq``, every hardware source of a
  read field (STATUS.key_busy included) and every flip-flop except the staging words and
  the holding register are equal in the two copies, in every cycle (by k-induction). So
  no bit of a staged key can reach a register read. (The keys do change what the engines
  do — a wrong key fails a tag — which the shared stubs leave out on purpose: this is
  about the register file and the control plane, not about the cipher.)
"""
import re

from amaranth.asserts import AnySeq
from amaranth.hdl import Cat, Mux, Signal, Value
from amaranth.lib import wiring

from hw.csr import Access
from hw.sxp import SXP
from hw.sxp.control import KeyStager, TrustGate
from hw.sxp.regs import ADDR_KEY, ADDR_KEY_COMMIT, KEY_WORDS

from . import Harness, Property, Stub, discard, free_inputs, freeze, registers, with_mutant
from .aes import scrub_checks

__all__ = ["PROPERTIES", "control_plane", "register_file"]

CONTEXTS, LANES = 2, 1
DATAPATH = ("requests", "completions", "parking", "engine_w", "engine_r")
KEY_ADDRS = [ADDR_KEY + 4 * k for k in range(KEY_WORDS)] + [ADDR_KEY_COMMIT]


def control_plane(contexts=CONTEXTS, lanes=LANES, *, trust=None, keys=None, drivers=None):
    """An SXP whose datapath blocks are :class:`Stub` s (with shared *drivers*
    ``{block: {path: signal}}`` if given); *trust* / *keys*: a mutant name for the
    TrustGate / KeyStager. Returns ``(sxp, frozen, fragment, register_file)``."""
    sxp = SXP(contexts, lanes)
    for name in DATAPATH:
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


# ---------------------------------------------------------------- trusted-mode lock
def trusted_lock(mutant=None):
    h = Harness()
    sxp, frozen, fragment, rf = control_plane(trust=mutant)
    h.m.submodules.sxp = frozen
    free_inputs(h.m, sxp)
    host, ccu = sxp.host, sxp.ccu
    trusted = sxp.trust.trusted
    # the previous cycle
    was = h.past(trusted & ~h.rst, "was_trusted")
    host_read = h.past(host.r_stb, "host_read_prev")
    ccu_w = {name: h.past(getattr(ccu, name), f"ccu_{name}_prev")
             for name in ("w_stb", "addr", "w_data")}
    h.check("trusted_stays", trusted, guard=was)
    h.check("host_read_zero", host.r_data == 0, guard=was & host_read)
    for reg, f, port in _fields(rf, Access.RW):
        prev = h.past(port.q, f"{reg.name}_{f.name}_prev")
        hit = ccu_w["w_stb"] & (ccu_w["addr"] == reg.addr)
        want = Mux(hit, ccu_w["w_data"][f.offset:f.offset + f.width], prev)
        h.check(f"cfg_{reg.name}_{f.name}", port.q == want, guard=was)
    for reg, f, port in _fields(rf, Access.W1C):
        prev = h.past(port.q, f"{reg.name}_{f.name}_prev")
        hw_set = h.past(port.set, f"{reg.name}_{f.name}_set_prev")
        hit = ccu_w["w_stb"] & (ccu_w["addr"] == reg.addr)
        clear = Mux(hit, ccu_w["w_data"][f.offset:f.offset + f.width], 0)
        h.check(f"w1c_{reg.name}_{f.name}", port.q == ((prev & ~clear) | hw_set), guard=was)
    now = trusted & ~h.rst
    for reg, f, port in _fields(rf, Access.W):
        ccu_hit = _writes(ccu, reg)
        h.check(f"stb_{reg.name}_{f.name}", port.stb == ccu_hit, guard=now)
        h.check(f"data_{reg.name}_{f.name}",
                port.data == ccu.w_data[f.offset:f.offset + f.width], guard=now & ccu_hit)
    ccu_idle = ~ccu_w["w_stb"]
    stage = Cat(*sxp.keys.stage)
    stage_prev = h.past(stage, "key_stage_prev")
    held_prev = h.past(sxp.keys.held, "key_held_prev")
    h.check("key_stage_kept", stage == stage_prev, guard=was & ccu_idle)
    h.check("key_held_kept_or_cleared", (sxp.keys.held == held_prev) | (sxp.keys.held == 0),
            guard=was & ccu_idle)
    h.notes.append(f"SXP(contexts={CONTEXTS}, lanes={LANES}) with stubbed datapath blocks "
                   f"{', '.join(DATAPATH)}; trusted = sxp.trust.trusted")
    return h


# ---------------------------------------------------------------- write-only key slots
def _datapath_signatures():
    sxp = SXP(CONTEXTS, LANES)
    discard(sxp)
    return {name: getattr(sxp, name).signature for name in DATAPATH}


def key_slots_write_only(mutant=None):
    """Two copies of the SXP control plane (a miter); see the module docstring."""
    h = Harness()
    m = h.m
    drivers = {name: Stub.shared_drivers(sig, name) for name, sig in _datapath_signatures().items()}
    for block in drivers.values():
        for value in block.values():
            value = Value.cast(value)
            m.d.comb += value.eq(AnySeq(len(value)))
    a, fa, frag_a, rf_a = control_plane(drivers=drivers, keys=mutant)
    b, fb, frag_b, rf_b = control_plane(drivers=drivers, keys=mutant)
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
    # no read returns a key bit: a key slot reads zero, and nothing read differs
    for port in ("host", "ccu"):
        bus = getattr(a, port)
        slot_read = h.past(~h.rst & bus.r_stb & Cat(*(bus.addr == k for k in slots)).any(),
                           f"{port}_slot_read_prev")
        h.check(f"{port}_key_slot_reads_zero", bus.r_data == 0, guard=slot_read)
        h.check(f"{port}_r_data_equal", bus.r_data == getattr(b, port).r_data)
    h.check("irq_equal", a.irq == b.irq)
    # the hardware sources of every read field
    for (reg, f, pa), (_, _, pb) in zip(_fields(rf_a, Access.R), _fields(rf_b, Access.R)):
        h.check(f"src_{reg.name}_{f.name}", pa.r == pb.r)
    # every flip-flop of the two copies is equal except the key staging registers: the
    # key data reaches nothing else (and this makes the induction close at k = 1)
    regs_b = dict(registers(frag_b))
    key_regs = re.compile(r"^keys\.(key_stage\d+|key_held)$")
    kept = []
    for path, sig in registers(frag_a):
        if key_regs.match(path):
            kept.append(path)
            continue
        h.check("eq_" + path.replace(".", "__"), sig == regs_b[path])
    if len(kept) != KEY_WORDS + 1:
        raise RuntimeError(f"expected the {KEY_WORDS} staging words and the held key, found {kept}")
    h.notes.append(f"registers allowed to differ between the copies: {', '.join(kept)}")
    h.notes.append("miter: two SXP control planes (datapath stubs driven by the same free "
                   "values), the same inputs except w_data of writes to KEY_W0..7")
    return h


PROPERTIES = [
    *with_mutant(Property("sxp", "key_stage_scrub", key_stage_scrub, depth=3, window=True,
                          params={"component": "KeyStager", "contexts": CONTEXTS},
                          doc="KeyStager: staging words, held key, flags are zero in the first cycle "
                              "after reset (ordinary resets: scrub length 0)"),
                 "keep_held", "the holding register has no reset"),
    *with_mutant(Property("sxp", "trusted_lock", trusted_lock, depth=6, induction=2,
                          params={"contexts": CONTEXTS, "lanes": LANES, "datapath": "stubbed"},
                          doc="trusted: host reads return 0; config, STATUS.exc, key strobes and "
                              "staging change only by the ccu port; trusted mode stays"),
                 "unlock", "TrustGate.locked forgets trusted", hook="TrustGate._formal_mutant"),
    *with_mutant(Property("sxp", "key_slots_write_only", key_slots_write_only, depth=3, induction=1,
                          params={"contexts": CONTEXTS, "lanes": LANES, "datapath": "stubbed", "copies": 2},
                          doc="key slots read zero on both ports, and (miter) no read of either port "
                              "depends on the data written to the key slots"),
                 "leak", "a staged key bit shows in STATUS.key_busy", hook="KeyStager._formal_mutant"),
]
