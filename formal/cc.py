"""``cc_ctrl`` and ``cc_dma`` (hw/cc): the BAR0 decoupler, the memory firewall, the FLR memory
scrub, the refusal counters, the DMA's commit-after-tag, its IV counters and its key scrub.

- ``cc_ctrl/decoupler`` on ``CCCtrl(depth=4, protected=3)``: in every row of the decoupler
  (CC off, CC on, devtools, and the scrub that follows a reset or FLR), a host access that
  the allow-list below does not permit never reaches the register file: the register file's
  host port sees no read strobe (reads) / no write strobe (writes), a refused read returns
  zero in the next cycle, and a refused write (firmware port idle, no reset or FLR) changes
  no stored register (RW, WO, W1C bits only set by the hardware) and not the mode store.
  The allow-list is written out here from the specification (docs/cc.md), not imported
  from ``hw/cc/regs.py`` (the RTL's table). By k-induction.
- ``cc_ctrl/counters_saturate`` on the same ``CCCtrl``: the refusal counters ``DEC_COUNT``
  (decoupler) and ``FW_COUNT`` (firewall) hold or count up by one from each cycle to the
  next unless the reset or ``flr`` was high, from any state (``Harness(reset="free")``; the
  reset and ``flr`` free in every cycle): they hold at 2³² − 1. By 1-induction.
- ``cc_ctrl/firewall`` on the same ``CCCtrl``: the firewall rule of docs/cc.md, written out
  here (:func:`_spec_refused`), not imported from the RTL. CC off refuses nothing; in CC on,
  devtools and code 3 a HOST or code-3 request to a protected word and an ENGINE write
  outside them are refused: in the cycle it is taken neither memory port (the
  ``lib.memory.Memory`` inside cc_ctrl) is enabled, and its response has ``ok`` 0 and data
  0. Any other request reaches its word (write port: its address and data; read port: its
  address) and answers ``ok`` 1. By k-induction (k = 2).
- ``cc_ctrl/flr_scrub_closed``: ``mem_req`` takes nothing in the reset/FLR cycle and the
  ``depth`` cycles after it. By k-induction (k = 5).
- ``cc_ctrl/flr_scrub_words``: every word is scrubbed: after a reset or FLR a read of any
  word (chosen by the solver), by any initiator, answers zero until that word is written;
  the memory is seen only through ``mem_resp`` (its initial content is arbitrary). Bounded:
  memory content is not a register the harness can relate, so induction cannot close.
- ``cc_dma/commit_after_tag``, ``cc_dma/commit_data``, ``cc_dma/iv_fresh`` on
  ``CCDma(channels=1, frame_blocks=1, slots=2, addr_bits=8)`` with its ``gcm_core`` replaced
  by :class:`AbstractGcm` (gcm_core's stream protocol only; blocks, tag verdicts and timing
  free), all inputs free, regions constant and disjoint: a write to protected memory only
  for blocks of inbound frames whose tag matched (counted at the engine's output); the
  committed word is the engine's plaintext of that block; every IV block into the engine
  under one key is at or above the installed IV, below 2^32 - 1, of its direction, and
  above the last one of its direction (no repeat, no wrap, replay refused). Bounded (see
  the depth reasons: one committed frame, two IVs per direction).
- ``cc_dma/commit_frames`` on ``CCDma(channels=1, frame_blocks=2, slots=2, addr_bits=8)``,
  gcm_core abstracted as above but eager (fixed timing), at most two descriptors without a
  status: each write to protected memory belongs to the oldest descriptor without a status,
  which is inbound and whose tag matched; the k-th goes to ``dst + k``, k < ``len``, with
  the engine's plaintext of that block; its status (in order, its tag) follows ``len``
  writes when OK, none otherwise, and is OK exactly when the tag matched. Bounded (one
  committed frame of 1 or 2 blocks).
- ``cc_dma/reset_scrub`` on ``CCDma(channels=1, frame_blocks=2, slots=2, addr_bits=8)``:
  the key state of the DMA is its ``gcm_core``'s contexts (cc_dma keeps no key register of
  its own: the ``key`` stream goes straight into ``gcm_core.key``) and the per-channel IV
  counters and key flags. ``max(scrub_cycles, gcm flush_cycles)`` cycles after reset
  (both the RTL's constants), every reset-less register of the gcm_core (context key, H,
  X, nonce, beat index, s0, P, read-ahead, O; the AES pipeline at its zero-key constants)
  and the channel state (``has_key``, ``tx_next``, ``rx_next``, ``tx_spent``) are zero.
  The mutant is the gcm_core's ``keep_key`` hook (the DMA's gcm instance is swapped before
  elaboration: no hook in cc_dma itself).
"""
import re
from types import SimpleNamespace

from amaranth.asserts import AnySeq
from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import wiring

from hw.cc import CCCtrl, CCDma
from hw.cc.layout import CTR_LIMIT, Dir, Status
from hw.csr import Access
from hw.gcm import GcmCore

from . import Harness, Property, discard, free_inputs, freeze, registers, submodule, with_mutant, with_mutants
from .aes import scrub_checks
from .gcm import gcm_scrub_value

__all__ = ["PROPERTIES", "SPEC_ALLOW"]

# ---------------------------------------------------------------- cc_ctrl decoupler
# The host allow-list of docs/cc.md, written out by hand: byte address -> permissions in
# (CC off, CC on, devtools); while the scrub runs only CC_MODE may be read. Any other
# address is refused in every row.
SPEC_ALLOW = {
    0x00: ("r", "r", "r"),      # CC_MODE
    0x04: ("w", "w", "w"),      # CC_MODE_SET
    0x08: ("rw", "rw", "rw"),   # CC_STATUS
    0x0C: ("r", "r", "r"),      # DEC_COUNT
    0x10: ("r", "r", "r"),      # DEC_LOG
    0x14: ("r", "r", "r"),      # FW_COUNT
    0x18: ("r", "r", "r"),      # FW_LOG
    0x20: ("rw", "", "rw"),     # PERF_CTRL
    0x24: ("r", "", "r"),       # PERF_CYCLES
    0x28: ("r", "", "r"),       # PERF_ACCESSES
    **{0x40 + 4 * k: ("w", "", "") for k in range(8)},      # KEY0..7
    **{0x80 + 4 * k: ("rw", "", "") for k in range(4)},     # SCRATCH0..3
}
SCRUB_READ = (0x00,)            # the scrub row: CC_MODE readable, nothing writable
MODES = ("off", "on", "devtools")


def _allowed(mode, scrub, addr, kind):
    """A 1-bit value: the spec lets the host *kind* ("r"/"w") *addr* in this cycle."""
    terms = []
    for a, perms in SPEC_ALLOW.items():
        for code, perm in enumerate(perms):
            if kind in perm:
                terms.append(~scrub & (mode == code) & (addr == a))
    if kind == "r":
        terms += [scrub & (addr == a) for a in SCRUB_READ]
    return Cat(*terms).any()


DEPTH, PROTECTED = 4, 3


def decoupler(mutant=None):
    h = Harness()
    dut = CCCtrl(DEPTH, PROTECTED, _formal_mutant=mutant)
    frozen, fragment = freeze(dut)
    h.m.submodules.dut = frozen
    free_inputs(h.m, dut)
    rf = dut._rf
    host = dut.host
    # the row: the active mode (code 3 is never active after a reset; from an arbitrary
    # state it counts as the scrub row, the most restrictive), or the scrub
    scrub = Signal(name="spec_scrub")
    h.m.d.comb += scrub.eq(~dut.ready | dut.flr | (dut.mode.as_value() == 3))
    mode = dut.mode.as_value()
    may_r, may_w = Signal(name="spec_may_read"), Signal(name="spec_may_write")
    h.m.d.comb += [may_r.eq(_allowed(mode, scrub, host.addr, "r")),
                   may_w.eq(_allowed(mode, scrub, host.addr, "w"))]
    # reads: nothing refused reaches the register file, and it reads zero
    h.check("read_not_forwarded", ~rf.host.r_stb, guard=host.r_stb & ~may_r)
    refused_read = h.past(host.r_stb & ~may_r & ~h.rst, "refused_read_prev")
    h.check("refused_read_zero", host.r_data == 0, guard=refused_read)
    # writes: nothing refused reaches the register file, and no register changes
    h.check("write_not_forwarded", ~rf.host.w_stb, guard=host.w_stb & ~may_w)
    refused_write = h.past(host.w_stb & ~may_w & ~dut.fw.w_stb & ~dut.flr & ~h.rst,
                           "refused_write_prev")
    for reg in rf.regmap:
        for f in reg.fields:
            port = rf[reg.name][f.name]
            if f.access in (Access.RW, Access.WO):
                prev = h.past(port.q, f"{reg.name}_{f.name}_prev")
                h.check(f"kept_{reg.name}_{f.name}", port.q == prev, guard=refused_write)
            elif f.access is Access.W1C:
                prev = h.past(port.q, f"{reg.name}_{f.name}_prev")
                h.check(f"not_cleared_{reg.name}_{f.name}", (prev & ~port.q) == 0,
                        guard=refused_write)
    store_prev = h.past(dut.mode_store, "mode_store_prev")
    h.check("mode_store_kept", dut.mode_store.as_value() == store_prev, guard=refused_write)
    h.notes.append("spec allow-list (address: off/on/devtools; scrub: CC_MODE read only): "
                   + ", ".join(f"{a:#04x}:{'/'.join(p or '-' for p in perms)}"
                               for a, perms in SPEC_ALLOW.items()))
    return h


COUNTERS = ("dec_count", "fw_count")   # DEC_COUNT (decoupler), FW_COUNT (firewall)


def counters_saturate(mutant=None):
    h = Harness(reset="free")
    dut = CCCtrl(DEPTH, PROTECTED, _formal_mutant=mutant)
    frozen, fragment = freeze(dut)
    h.m.submodules.dut = frozen
    free_inputs(h.m, dut)
    state = dict(registers(fragment))
    for counter in COUNTERS:
        # the FLR clears them as the reset does (every register of cc_ctrl)
        h.counts_by_one(counter, state[counter], h.rst | dut.flr)
    h.notes.append(f"CCCtrl(depth={DEPTH}, protected={PROTECTED}); reset, flr and inputs "
                   "free in every cycle, any initial state")
    return h


# ---------------------------------------------------------------- cc_ctrl firewall
# The firewall rule of docs/cc.md ("Firewall"), written out by hand: in CC off nothing is
# refused; in CC on and devtools (and code 3, which acts as CC on) a host access (initiator
# HOST or code 3) to the protected words [0, protected) is refused, and so is an ENGINE
# write outside them; the DMA may go anywhere.
SRC_HOST, SRC_DMA, SRC_ENGINE = 0, 1, 2


def _spec_refused(mode, src, write, addr):
    """A 1-bit value: docs/cc.md's firewall refuses this request in *mode*."""
    host_like = (src == SRC_HOST) | (src == 3)
    protected = addr < PROTECTED
    return (mode != 0) & ((host_like & protected) | ((src == SRC_ENGINE) & write & ~protected))


def _mem_ports(fragment):
    """The write and read port of cc_ctrl's device memory (the ``mem`` submodule)."""
    mem = submodule(fragment, "mem")
    (wp,), (rp,) = mem.write_ports, mem.read_ports
    return wp, rp


def firewall(mutant=None):
    h = Harness()
    dut = CCCtrl(DEPTH, PROTECTED, _formal_mutant=mutant)
    frozen, fragment = freeze(dut)
    h.m.submodules.dut = frozen
    free_inputs(h.m, dut)
    wp, rp = _mem_ports(fragment)
    req, resp = dut.mem_req, dut.mem_resp
    p = req.payload
    take = Signal(name="take")
    refused = Signal(name="spec_refused")
    h.m.d.comb += [take.eq(req.valid & req.ready),
                   refused.eq(_spec_refused(dut.mode.as_value(), p.src.as_value(), p.write, p.addr))]
    # the cycle of a taken request: a refused one reaches no memory port, an allowed one
    # reaches its word (the scrub does not run then: ready is low while it does)
    h.check("refused_write_not_performed", ~wp.en, guard=take & refused & p.write)
    h.check("refused_read_not_forwarded", ~rp.en, guard=take & refused & ~p.write)
    h.check("allowed_write_performed", wp.en & (wp.addr == p.addr) & (wp.data == p.data),
            guard=take & ~refused & p.write)
    h.check("allowed_read_forwarded", rp.en & (rp.addr == p.addr), guard=take & ~refused & ~p.write)
    # its response (one per request, in order; an FLR drops it): refused = ok 0, data 0
    pend, pend_refused = Signal(name="resp_pending"), Signal(name="resp_pending_refused")
    with h.m.If(dut.flr):
        h.m.d.sync += pend.eq(0)
    with h.m.Elif(take):
        h.m.d.sync += [pend.eq(1), pend_refused.eq(refused)]
    with h.m.Elif(resp.valid & resp.ready):
        h.m.d.sync += pend.eq(0)
    h.check("response_of_request", ~resp.valid | pend)
    h.check("refused_response_empty", (resp.payload.ok == 0) & (resp.payload.data == 0),
            guard=resp.valid & pend & pend_refused)
    h.check("allowed_response_ok", resp.payload.ok == 1, guard=resp.valid & pend & ~pend_refused)
    h.notes.append(f"CCCtrl(depth={DEPTH}, protected={PROTECTED}); rule (docs/cc.md): CC off refuses "
                   "nothing; otherwise HOST/code-3 to [0, protected) and ENGINE writes outside it")
    return h


def _scrub_harness(mutant):
    """cc_ctrl and the harness's count of cycles since the last reset or FLR cycle
    (``scrub_age``: 0 in the first cycle after it, saturating at ``DEPTH``)."""
    h = Harness()
    dut = CCCtrl(DEPTH, PROTECTED, _formal_mutant=mutant)
    frozen, _fragment = freeze(dut)
    h.m.submodules.dut = frozen
    free_inputs(h.m, dut)
    clear = h.past(h.rst | dut.flr, "cleared_prev")       # the last cycle was a reset or FLR
    age = Signal(range(DEPTH + 1), name="cycles_since_clear")
    with h.m.If(clear):
        h.m.d.sync += age.eq(1)
    with h.m.Elif(age < DEPTH):        # (not `!= DEPTH`: from any state it must not wrap)
        h.m.d.sync += age.eq(age + 1)
    age_now = Signal(range(DEPTH + 1), name="scrub_age")
    h.m.d.comb += age_now.eq(Mux(clear, 0, age))
    return h, dut, age_now


def flr_scrub_closed(mutant=None):
    """No memory request is taken while the scrub runs: ``mem_req.ready`` is low in the
    reset or FLR cycle and the ``depth`` cycles after it (one word per cycle, docs/cc.md)."""
    h, dut, age = _scrub_harness(mutant)
    h.check("closed_in_flr_cycle", ~dut.mem_req.ready, guard=dut.flr)
    h.check("closed_while_scrubbing", ~dut.mem_req.ready, guard=age < DEPTH)
    h.notes.append(f"CCCtrl(depth={DEPTH}, protected={PROTECTED}); every mode")
    return h


def flr_scrub_words(mutant=None):
    """Every word is scrubbed: after a reset or FLR, a read of any word (``watch``, chosen
    by the solver), by any initiator, returns zero until something writes that word. The
    memory's content is observed only through ``mem_resp``."""
    h, dut, _age = _scrub_harness(mutant)
    req, resp = dut.mem_req, dut.mem_resp
    p = req.payload
    watch = h.any_const(range(DEPTH), "watch")
    take = req.valid & req.ready
    written = Signal(name="watch_written")              # since the last reset or FLR
    pend = Signal(name="watch_read_pending")            # the response to a read of watch
    with h.m.If(dut.flr):
        h.m.d.sync += [written.eq(0), pend.eq(0)]
    with h.m.Else():
        with h.m.If(take & p.write & (p.addr == watch)):
            h.m.d.sync += written.eq(1)
        with h.m.If(take):
            h.m.d.sync += pend.eq(~p.write & (p.addr == watch) & ~written)
        with h.m.Elif(resp.valid & resp.ready):
            h.m.d.sync += pend.eq(0)
    h.check("unwritten_word_reads_zero", resp.payload.data == 0, guard=resp.valid & pend)
    h.notes.append(f"CCCtrl(depth={DEPTH}, protected={PROTECTED}); every mode, every initiator")
    return h


# ---------------------------------------------------------------- cc_ctrl key and PERF
KEY_ADDRS = tuple(0x40 + 4 * k for k in range(8))     # KEY0..7 (docs/cc.md), word k = bits 32k..


def key_output(mutant=None):
    """The ``key`` output (the key state the engine uses) is KEY0..KEY7 as last written by
    an access the specification allows — the firmware port outside the scrub (it wins when
    both ports write a word in one cycle), the host where the allow-list lets it write —
    word k at bits 32k .. 32k + 31, and zero after a reset or FLR. The spec side is the
    harness's own copy of the eight words, written from the two CSR ports."""
    h = Harness()
    dut = CCCtrl(DEPTH, PROTECTED, _formal_mutant=mutant)
    frozen, _fragment = freeze(dut)
    h.m.submodules.dut = frozen
    free_inputs(h.m, dut)
    host, fw = dut.host, dut.fw
    scrub = ~dut.ready | dut.flr | (dut.mode.as_value() == 3)
    fw_w = Signal(name="spec_fw_write")
    host_w = Signal(name="spec_host_write")
    h.m.d.comb += [fw_w.eq(fw.w_stb & dut.ready & ~dut.flr),
                   host_w.eq(host.w_stb & ~dut.flr & _allowed(dut.mode.as_value(), scrub, host.addr, "w"))]
    words = [Signal(32, name=f"spec_key{k}") for k in range(len(KEY_ADDRS))]
    for k, addr in enumerate(KEY_ADDRS):
        with h.m.If(h.rst | dut.flr):
            h.m.d.sync += words[k].eq(0)
        with h.m.Elif(fw_w & (fw.addr == addr)):
            h.m.d.sync += words[k].eq(fw.w_data)
        with h.m.Elif(host_w & (host.addr == addr)):
            h.m.d.sync += words[k].eq(host.w_data)
    h.check("key_is_written_words", dut.key == Cat(*words))
    h.notes.append(f"CCCtrl(depth={DEPTH}, protected={PROTECTED}); KEY words at "
                   + ", ".join(f"{a:#04x}" for a in KEY_ADDRS))
    return h


MODE_SET = 0x04        # CC_MODE_SET (docs/cc.md): bits 1..0 the new mode, host-writable in every mode


def mode_store(mutant=None):
    """The CC mode as docs/cc.md gives it, in a copy the harness keeps: at power-on (reset)
    the store and the active mode load ``mode_nv`` (code 3 as ON, fail-secure); a
    CC_MODE_SET write the spec allows (firmware outside the scrub, it wins over the host in
    one cycle; the host outside the scrub) puts its mode into the store unless it is 3 (then
    ``CC_STATUS.bad_mode`` is set instead); an FLR makes the store the active mode; nothing
    else changes either. ``mode`` shows the active mode, ``mode_store`` the store."""
    h = Harness()
    dut = CCCtrl(DEPTH, PROTECTED, _formal_mutant=mutant)
    frozen, _fragment = freeze(dut)
    h.m.submodules.dut = frozen
    free_inputs(h.m, dut)
    host, fw = dut.host, dut.fw
    scrub = ~dut.ready | dut.flr | (dut.mode.as_value() == 3)
    fw_set = fw.w_stb & dut.ready & ~dut.flr & (fw.addr == MODE_SET)
    host_set = host.w_stb & ~dut.flr & _allowed(dut.mode.as_value(), scrub, host.addr, "w") & (host.addr == MODE_SET)
    value = Signal(2, name="spec_mode_written")
    h.m.d.comb += value.eq(Mux(fw_set, fw.w_data[:2], host.w_data[:2]))
    written = Signal(name="spec_mode_set")
    h.m.d.comb += written.eq(fw_set | host_set)
    nv = dut.mode_nv.as_value()
    # reset_less: they load mode_nv in the reset cycle, as the store does
    store = Signal(2, name="spec_store", reset_less=True)
    active = Signal(2, name="spec_active", reset_less=True)
    with h.m.If(h.rst):
        h.m.d.sync += [store.eq(Mux(nv == 3, 1, nv)), active.eq(Mux(nv == 3, 1, nv))]
    with h.m.Else():
        with h.m.If(written & (value != 3)):
            h.m.d.sync += store.eq(value)
        with h.m.If(dut.flr):
            h.m.d.sync += active.eq(store)
    h.check("active_mode", dut.mode.as_value() == active)
    h.check("stored_mode", dut.mode_store.as_value() == store)
    bad = dut._rf["CC_STATUS"]["bad_mode"].q
    set3_prev = h.past(written & (value == 3) & ~h.rst, "spec_set3_prev")
    h.check("bad_mode_set", bad, guard=set3_prev)
    h.notes.append(f"CCCtrl(depth={DEPTH}, protected={PROTECTED}); CC_MODE_SET at {MODE_SET:#04x}")
    return h


def perf_counters(mutant=None):
    """``PERF_CYCLES`` and ``PERF_ACCESSES`` (as the host reads them) from one cycle to
    the next, from any state: zero after a reset, an FLR or a cycle in CC on; otherwise,
    while ``PERF_CTRL.en`` was set, one more cycle and one more per request the memory
    port took; else unchanged. In CC on they read zero (no timing channel for the host)."""
    h = Harness(reset="free")
    dut = CCCtrl(DEPTH, PROTECTED, _formal_mutant=mutant)
    frozen, _fragment = freeze(dut)
    h.m.submodules.dut = frozen
    free_inputs(h.m, dut)
    rf = dut._rf
    cycles, accesses = rf["PERF_CYCLES"]["count"].r, rf["PERF_ACCESSES"]["count"].r
    on = dut.mode.as_value() == 1
    cleared = h.past(h.rst | dut.flr | on, "perf_cleared_prev")
    counting = h.past(rf["PERF_CTRL"]["en"].q, "perf_en_prev")
    took = h.past(dut.mem_req.valid & dut.mem_req.ready, "mem_taken_prev")
    cycles_prev = h.past(cycles, "perf_cycles_prev")
    accesses_prev = h.past(accesses, "perf_accesses_prev")
    h.check("cleared", (cycles == 0) & (accesses == 0), guard=cleared)
    h.check("cycles_count", cycles == (cycles_prev + 1)[:32], guard=~cleared & counting)
    h.check("accesses_count", accesses == (accesses_prev + took)[:32], guard=~cleared & counting)
    h.check("held_when_off", (cycles == cycles_prev) & (accesses == accesses_prev),
            guard=~cleared & ~counting)
    h.check("zero_in_cc_on", (cycles == 0) & (accesses == 0), guard=on & ~h.rst)
    h.notes.append(f"CCCtrl(depth={DEPTH}, protected={PROTECTED}); reset, flr and inputs free in "
                   "every cycle, any initial state")
    return h


# ---------------------------------------------------------------- cc_dma key scrub
DMA = {"channels": 1, "frame_blocks": 2, "slots": 2, "addr_bits": 8}
DMA_ROLES = {
    "context key": r"^gcm\.ctx\d+_key$",
    "H (hash key)": r"^gcm\.ctx\d+_h$",
    "X (partial hash)": r"^gcm\.ctx\d+_x$",
    "nonce (counter block)": r"^gcm\.ctx\d+_nonce$",
    "beat index (counter)": r"^gcm\.ctx\d+_(beat|beat1|count)$",
    "AES input key (s0)": r"^gcm\.s0_key$",
    "E_K(J0) / tag mask, operands (P)": r"^gcm\.p$",
    "AES round keys": r"^gcm\.aes\.s\d+_key$",
    "IV counters": r"^(tx|rx)_next\d+$",
}
_DMA_STATE = r"^(tx|rx)_next\d+$"


def dma_scrub(mutant=None):
    h = Harness()
    dut = CCDma(**DMA)
    if mutant is not None:
        discard(dut._gcm)
        dut._gcm = GcmCore(DMA["channels"], _formal_mutant=mutant)
    frozen, fragment = freeze(dut)
    h.m.submodules.dut = frozen
    free_inputs(h.m, dut)
    n = _dma_n()

    def covered(path, sig):
        return (path.startswith("gcm.") and sig.reset_less) or re.match(_DMA_STATE, path)

    def expected(path, sig):
        return gcm_scrub_value(path[len("gcm."):], sig) if path.startswith("gcm.") else 0
    scrub_checks(h, fragment, n, covered, expected, DMA_ROLES)
    return h


# ---------------------------------------------------------------- cc_dma commit and IVs
class AbstractGcm(wiring.Component):
    """gcm_core abstracted for the cc_dma properties: it keeps only gcm_core's stream
    protocol — one output per input, in order, with the input's ``op`` (and ``ctx``) — in a
    *depth*-entry queue; when it takes an input, when it offers an output, the output
    ``block`` (ciphertext or plaintext, IV echo, tag) and ``tag_ok`` are free in every
    cycle, so a property proved with it holds for any AES and GHASH, any verdict and any
    latency. ``err`` is 0 (gcm_core raises it on no key only, which cc_dma never sends;
    docs/cc.md, status ENGINE). ``o_decrypt``: the ``decrypt`` bit its output came in with
    (the harness's own record, so that it knows an inbound frame's outputs). *eager*: it
    takes an input whenever its queue has room and offers its oldest output whenever it
    holds one (its timing is then fixed, a 1-cycle engine; blocks and verdicts stay free)."""

    def __init__(self, signature, depth=2, *, eager=False):
        if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
            raise ValueError(f"depth must be a positive int, not {depth!r}")
        if not isinstance(eager, bool):
            raise TypeError(f"eager must be a bool, not {eager!r}")
        self._depth, self._eager = depth, eager
        self.o_decrypt = Signal(name="eng_o_decrypt")
        super().__init__(signature)

    def elaborate(self, platform):
        m = Module()
        n = self._depth
        ctx_bits = len(self.i.payload.ctx)
        width = 2 + 1 + ctx_bits                        # op, decrypt, ctx
        q = [Signal(width, name=f"eng_q{k}") for k in range(n)]
        level = Signal(range(n + 1), name="eng_level")
        i_take = self.i.valid & self.i.ready
        o_take = self.o.valid & self.o.ready
        p = self.i.payload
        m.d.comb += [
            self.i.ready.eq((level != n) & (1 if self._eager else AnySeq(1))),
            self.o.valid.eq((level != 0) & (1 if self._eager else AnySeq(1))),
            self.o.payload.op.eq(q[0][:2]),
            self.o_decrypt.eq(q[0][2]),
            self.o.payload.ctx.eq(q[0][3:]),
            self.o.payload.block.eq(AnySeq(len(self.o.payload.block))),
            self.o.payload.tag_ok.eq(AnySeq(1)),
            self.o.payload.err.eq(0),
            self.key.ready.eq(AnySeq(1)),
        ]
        entry = Cat(p.op.as_value(), p.decrypt, p.ctx)
        after = Signal(range(n + 1))                    # level once the output left
        m.d.comb += after.eq(level - o_take)
        for k in range(n):
            nxt = q[k + 1] if k + 1 < n else q[k]
            with m.If(i_take & (after == k)):
                m.d.sync += q[k].eq(entry)
            with m.Elif(o_take):
                m.d.sync += q[k].eq(nxt)
        m.d.sync += level.eq(after + i_take)
        return m


DMA_C = {"channels": 1, "frame_blocks": 1, "slots": 2, "addr_bits": 8}
OP_IV, OP_DATA, OP_MAC = 0, 1, 2
DIR_OUT_BYTE, DIR_IN_BYTE = 0, 1


def _dma_abstract(mutant, params=DMA_C, eager=False):
    """``(harness, dut, engine, bounds)``: CCDma(**params) with gcm_core replaced by
    :class:`AbstractGcm`; every input free, the four region bounds constant (the trusted
    side's settings) with protected memory and the bounce buffer disjoint."""
    h = Harness()
    dut = CCDma(**params, _formal_mutant=mutant)
    discard(dut._gcm)
    dut._gcm = eng = AbstractGcm(dut._gcm.signature, eager=eager)
    frozen, _fragment = freeze(dut)
    h.m.submodules.dut = frozen
    regions = ("prot_base", "prot_limit", "bb_base", "bb_limit")
    free_inputs(h.m, dut, skip={(r,) for r in regions})
    bounds = {}
    for r in regions:
        bounds[r] = h.any_const(params["addr_bits"], f"region_{r}")
        h.m.d.comb += getattr(dut, r).eq(bounds[r])
    h.assume((bounds["prot_limit"] <= bounds["bb_base"]) | (bounds["bb_limit"] <= bounds["prot_base"]))
    return h, dut, eng, bounds


CNT = 6     # harness counters: blocks and frames within the bounded depth


def _inbound_ledger(h, dut, eng, b):
    """The harness's account of inbound frames leaving the (abstract) engine and of writes
    to protected memory. Returns a namespace: ``wr_prot`` (a write to protected memory is
    accepted this cycle), ``written`` (such writes so far), ``credit`` (data blocks of
    inbound frames whose tag matched), ``skipped`` (of those whose tag failed),
    ``data_idx`` (inbound data blocks out of the engine so far), ``dec_out``, ``op``."""
    o, wr = eng.o, dut.wr
    led = SimpleNamespace(op=o.payload.op.as_value())
    led.dec_out = o.valid & o.ready & eng.o_decrypt            # an inbound frame's output
    led.wr_prot = Signal(name="wr_to_protected")
    h.m.d.comb += led.wr_prot.eq(wr.valid & wr.ready & (wr.payload.addr >= b["prot_base"])
                                 & (wr.payload.addr < b["prot_limit"]))
    fdata = Signal(CNT, name="frame_data_blocks")             # of the inbound frame leaving
    led.credit = Signal(CNT, name="authenticated_blocks")
    led.skipped = Signal(CNT, name="rejected_blocks")
    led.written = Signal(CNT, name="protected_writes")
    led.data_idx = Signal(CNT, name="inbound_data_index")
    op, dec_out = led.op, led.dec_out
    with h.m.If(dec_out & (op == OP_IV)):
        h.m.d.sync += fdata.eq(0)
    with h.m.If(dec_out & (op == OP_DATA)):
        h.m.d.sync += [fdata.eq(fdata + 1), led.data_idx.eq(led.data_idx + 1)]
    with h.m.If(dec_out & (op == OP_MAC)):
        with h.m.If(o.payload.tag_ok):
            h.m.d.sync += led.credit.eq(led.credit + fdata)
        with h.m.Else():
            h.m.d.sync += led.skipped.eq(led.skipped + fdata)
    with h.m.If(led.wr_prot):
        h.m.d.sync += led.written.eq(led.written + 1)
    return led


def dma_commit_order(mutant=None):
    """A write to protected memory only for a data block of an inbound frame whose tag
    matched: at every such write, fewer blocks were written than authenticated (writes are
    in frame order, so a frame whose tag failed, or one not yet checked, has no credit)."""
    h, dut, eng, b = _dma_abstract(mutant)
    led = _inbound_ledger(h, dut, eng, b)
    h.check("write_after_tag_match", led.written < led.credit, guard=led.wr_prot)
    h.notes.append(f"CCDma({DMA_C}) with gcm_core abstracted (AbstractGcm: op order kept, blocks, "
                   "tag verdicts and timing free); regions constant and disjoint")
    return h


def dma_commit_data(mutant=None):
    """The write that commits an authenticated data block carries that block's plaintext as
    the engine gave it: one inbound data block (``watch``, chosen by the solver) is followed
    from the engine's output to its place among the authenticated blocks."""
    h, dut, eng, b = _dma_abstract(mutant)
    led = _inbound_ledger(h, dut, eng, b)
    _check_committed_word(h, dut, eng, led)
    h.notes.append(f"CCDma({DMA_C}) with gcm_core abstracted (AbstractGcm); regions constant and disjoint")
    return h


def _check_committed_word(h, dut, eng, led):
    """``committed_word_is_the_frames`` (see :func:`dma_commit_data`)."""
    o, wr = eng.o, dut.wr
    watch = h.any_const(CNT, "watch")
    wval = Signal(len(o.payload.block), name="watch_block")
    wpend, wvalid = Signal(name="watch_pending"), Signal(name="watch_authenticated")
    wtarget = Signal(CNT, name="watch_write_index")
    with h.m.If(led.dec_out & (led.op == OP_DATA) & (led.data_idx == watch)):
        h.m.d.sync += [wval.eq(o.payload.block), wpend.eq(1)]
    with h.m.If(led.dec_out & (led.op == OP_MAC) & wpend):
        h.m.d.sync += [wpend.eq(0), wvalid.eq(o.payload.tag_ok), wtarget.eq(watch - led.skipped)]
    h.check("committed_word_is_the_frames", wr.payload.data == wval,
            guard=led.wr_prot & wvalid & (led.written == wtarget))


# The multi-block commit harness: 2-block frames (a frame of 1 or 2 blocks), at most
# DESC_OUTSTANDING descriptors taken whose status has not been (the harness's record of them).
DMA_F = {"channels": 1, "frame_blocks": 2, "slots": 2, "addr_bits": 8}
DESC_OUTSTANDING = 2
ENGINE_CODES = (Status.OK, Status.AUTH, Status.ENGINE)     # an inbound frame that went through the engine


def dma_commit_frames(mutant=None):
    """The commit, frame by frame, against the descriptors as the harness took them (its own
    record: direction, ``dst``, ``len``, ``tag``). Statuses come in descriptor order, and a
    frame's commit writes all happen while it is the oldest descriptor without a status, so
    every write to protected memory belongs to that descriptor: it must be inbound, its
    frame's tag must have matched (the engine's verdicts of inbound frames, in order, matched
    to the inbound descriptors whose status says they went through the engine), and the k-th
    such write goes to ``dst + k`` with k < ``len`` (each block once, in order). At its
    status: ``len`` writes if the code is OK (inbound), none otherwise; the code is OK
    exactly when the engine's verdict matched; the tag is the descriptor's. And the data of
    each write is the engine's plaintext of that block (:func:`dma_commit_data`'s check).
    The engine is eager (:class:`AbstractGcm`): within the bounded depth only the fastest
    frames reach the commit, so a free engine timing adds search, not commits; ``wr``,
    ``status``, ``rd_resp``, ``desc`` and ``key`` keep their free timing."""
    h, dut, eng, b = _dma_abstract(mutant, DMA_F, eager=True)
    led = _inbound_ledger(h, dut, eng, b)
    _check_committed_word(h, dut, eng, led)
    desc, status, wr = dut.desc, dut.status, dut.wr
    ab, qb = DMA_F["addr_bits"], (DESC_OUTSTANDING - 1).bit_length()
    d_take = desc.valid & desc.ready
    s_take = status.valid & status.ready
    # the descriptors taken whose status has not been, in a ring indexed by their number
    n_desc, n_stat = Signal(CNT, name="descs_taken"), Signal(CNT, name="statuses_taken")
    ring = [SimpleNamespace(inbound=Signal(name=f"desc{k}_inbound"), dst=Signal(ab, name=f"desc{k}_dst"),
                            len=Signal(len(desc.payload.len), name=f"desc{k}_len"),
                            tag=Signal(len(desc.payload.tag), name=f"desc{k}_tag"))
            for k in range(DESC_OUTSTANDING)]
    p = desc.payload
    for k, r in enumerate(ring):
        with h.m.If(d_take & (n_desc[:qb] == k)):
            h.m.d.sync += [r.inbound.eq(p.dir == Dir.IN), r.dst.eq(p.dst), r.len.eq(p.len), r.tag.eq(p.tag)]
    h.m.d.sync += [n_desc.eq(n_desc + d_take), n_stat.eq(n_stat + s_take)]
    outstanding = Signal(CNT, name="descs_outstanding")
    h.m.d.comb += outstanding.eq(n_desc - n_stat)
    h.assume(~desc.valid | (outstanding < DESC_OUTSTANDING))
    head = SimpleNamespace(inbound=Signal(name="head_inbound"), dst=Signal(ab, name="head_dst"),
                           len=Signal(len(p.len), name="head_len"), tag=Signal(len(p.tag), name="head_tag"))
    for k, r in enumerate(ring):
        with h.m.If(n_stat[:qb] == k):
            h.m.d.comb += [head.inbound.eq(r.inbound), head.dst.eq(r.dst), head.len.eq(r.len),
                           head.tag.eq(r.tag)]
    # the engine's verdicts on inbound frames, in order, and the inbound statuses that went
    # through the engine
    n_mac, n_eng = Signal(CNT, name="inbound_macs"), Signal(CNT, name="inbound_engine_statuses")
    verdicts = Signal(DESC_OUTSTANDING, name="inbound_verdicts")
    mac_out = led.dec_out & (led.op == OP_MAC)
    for k in range(DESC_OUTSTANDING):
        with h.m.If(mac_out & (n_mac[:qb] == k)):
            h.m.d.sync += verdicts[k].eq(eng.o.payload.tag_ok)
    code = status.payload.code
    via_engine = Signal(name="status_via_engine")
    h.m.d.comb += via_engine.eq(head.inbound & Cat(*(code == c for c in ENGINE_CODES)).any())
    h.m.d.sync += [n_mac.eq(n_mac + mac_out), n_eng.eq(n_eng + (s_take & via_engine))]
    verdict_known = Signal(name="head_verdict_known")
    matched = Signal(name="head_tag_matched")
    h.m.d.comb += [verdict_known.eq(n_mac != n_eng),
                   matched.eq(verdict_known & (verdicts.bit_select(n_eng[:qb], 1) if qb else verdicts[0]))]
    # writes to protected memory since the last status
    k = Signal(CNT, name="head_writes")
    with h.m.If(s_take):
        h.m.d.sync += k.eq(0)
    with h.m.Elif(led.wr_prot):
        h.m.d.sync += k.eq(k + 1)
    k_after = Signal(CNT, name="head_writes_after")
    h.m.d.comb += k_after.eq(k + led.wr_prot)
    is_open = outstanding != 0
    h.check("commit_of_open_inbound", is_open & head.inbound, guard=led.wr_prot)
    h.check("commit_after_own_tag", matched, guard=led.wr_prot)
    h.check("commit_within_length", k < head.len, guard=led.wr_prot)
    h.check("commit_address", wr.payload.addr == (head.dst + k)[:ab], guard=led.wr_prot)
    ok = code == Status.OK
    h.check("status_in_order", is_open & (status.payload.tag == head.tag), guard=s_take)
    h.check("status_after_every_block", k_after == head.len, guard=s_take & head.inbound & ok)
    h.check("nothing_of_uncommitted", k_after == 0, guard=s_take & ~(head.inbound & ok))
    h.check("status_is_verdict", verdict_known & (ok == matched), guard=s_take & via_engine)
    # progress: once the head frame's tag has matched (its MAC left the engine), every cycle
    # with wr and status ready moves its commit on: the MAC into done_q, the first staging
    # read, one write per block, then the status; so by its len + 3rd such cycle the status
    # is taken (a stalled commit breaks no safety check above)
    due = Signal(name="head_commit_due")
    h.m.d.comb += due.eq(is_open & head.inbound & matched & wr.ready & status.ready)
    ready_cycles = Signal(CNT, name="head_ready_cycles")
    with h.m.If(s_take):
        h.m.d.sync += ready_cycles.eq(0)
    with h.m.Elif(due):
        h.m.d.sync += ready_cycles.eq(ready_cycles + 1)
    h.check("commit_in_time", s_take, guard=due & (ready_cycles >= head.len + 2))
    h.notes.append(f"CCDma({DMA_F}) with gcm_core abstracted (AbstractGcm, eager: blocks and verdicts free, "
                   f"timing fixed); regions constant and disjoint; at most {DESC_OUTSTANDING} descriptors "
                   "without a status")
    return h


def dma_iv(mutant=None):
    """Every IV block cc_dma hands the engine under one key is fresh (see the module
    docstring)."""
    h, dut, eng, _b = _dma_abstract(mutant)
    i, kp = eng.i, dut.key.payload
    install = Signal(name="install_ch0")
    h.m.d.comb += install.eq(dut.key.valid & dut.key.ready & (kp.ch == 0))
    iv_in = Signal(name="iv_into_engine")
    h.m.d.comb += iv_in.eq(i.valid & i.ready & (i.payload.op.as_value() == OP_IV))
    blk = i.payload.block
    ctr, dir_byte = blk[:32], blk[32:40]
    inst_iv = Signal(32, name="installed_iv")
    installed = Signal(name="key_installed")
    tx_seen, rx_seen = Signal(name="tx_seen"), Signal(name="rx_seen")
    tx_last, rx_last = Signal(32, name="tx_last"), Signal(32, name="rx_last")
    with h.m.If(install):
        h.m.d.sync += [inst_iv.eq(kp.iv), installed.eq(1), tx_seen.eq(0), rx_seen.eq(0)]
    with h.m.Elif(iv_in & ~i.payload.decrypt):
        h.m.d.sync += [tx_seen.eq(1), tx_last.eq(ctr)]
    with h.m.Elif(iv_in & i.payload.decrypt):
        h.m.d.sync += [rx_seen.eq(1), rx_last.eq(ctr)]
    tx, rx = iv_in & ~i.payload.decrypt, iv_in & i.payload.decrypt
    h.check("iv_under_installed_key", installed, guard=iv_in)
    h.check("iv_not_limit", ctr != CTR_LIMIT, guard=iv_in)
    h.check("iv_from_installed", ctr >= inst_iv, guard=iv_in)
    h.check("tx_direction", dir_byte == DIR_OUT_BYTE, guard=tx)
    h.check("rx_direction", dir_byte == DIR_IN_BYTE, guard=rx)
    h.check("tx_increasing", ctr > tx_last, guard=tx & tx_seen)
    h.check("rx_increasing", ctr > rx_last, guard=rx & rx_seen)
    h.notes.append(f"CCDma({DMA_C}) with gcm_core abstracted (AbstractGcm); key port, rd_resp and "
                   "desc free; installs on channel 0 restart the harness's record")
    return h


def _dma_n():
    """The cycle the checks look at: the later of the DMA's staging scrub and its gcm_core's
    flush (both the RTL's constants), after which the key port opens."""
    ref = CCDma(**DMA)
    discard(ref)
    return max(getattr(ref, "scrub_cycles", 0), ref._gcm.flush_cycles)


N_DMA = _dma_n()
# Bounded depths of the abstract-engine properties (CCDma(**DMA_C): a 2-cycle staging scrub,
# 1-block frames). Measured: the second IV of a direction enters the engine at step 11 (two
# outbound or two inbound frames); the first write of an inbound frame's commit is reachable
# at step 14; a second frame's commit write is not reachable before step 19, and steps past
# 16 cost minutes each with Boolector here (step 18 alone > 3 minutes).
IV_DEPTH = 13
IV_DEPTH_REASON = ("reset, the 2-cycle staging scrub, a key install, then two frames of one direction "
                   "whose IV blocks enter the engine: the second at step 11 (measured), so 13 steps "
                   "reach two frames per direction, a counter at 2^32 - 2 and its successor included")
COMMIT_DEPTH, DATA_DEPTH = 16, 15
COMMIT_DEPTH_REASON = ("the first commit write of an inbound frame is reachable at step 14 (reset, "
                       "scrub, key install, descriptor checks, IV/data/tag through the engine, staging "
                       "read), so 16 steps cover one frame's commit, a failed tag, a commit before the "
                       "tag; not a second frame's commit (step >= 19: minutes per step here)")
DATA_DEPTH_REASON = ("the first commit write (step 14) and its data; one committed frame, its word "
                     "compared with the engine's plaintext of it (a second commit needs >= 19 steps)")
# commit_frames (CCDma(**DMA_F): a 4-cycle staging scrub, frames of 1 or 2 blocks, the engine
# eager). Measured with its mutants: a 1-block frame's status is checked at step 15
# (commit_one_short), the second block of a 2-block frame is written at step 18
# (commit_addr_fixed); step 18 alone takes minutes with Boolector here.
FRAMES_DEPTH = 19
FRAMES_DEPTH_REASON = ("reset, the 4-cycle staging scrub, a key install, the descriptor checks, IV, data "
                       "and tag through the engine, the staging read: a 1-block frame is committed and "
                       "answered by step 16, the second block of a 2-block frame is written in step 18 "
                       "(measured), so 19 steps (0..18) cover one frame's commit of either length with its "
                       "address, data and status (a 1-block frame's); not a 2-block frame's status "
                       "(step 19) nor a second committed frame")
PROPERTIES = [
    *with_mutant(Property("cc_ctrl", "decoupler", decoupler, depth=DEPTH + 4, induction=1,
                          params={"depth": DEPTH, "protected": PROTECTED},
                          doc="every row: a host access outside the (hand-written) allow-list never "
                              "reaches a register; refused reads return 0, refused writes change "
                              "nothing"),
                 "open_scratch0", "SCRATCH0 readable and writable in CC on"),
    *with_mutants(Property("cc_ctrl", "firewall", firewall, depth=10, induction=2,
                           params={"depth": DEPTH, "protected": PROTECTED},
                           doc="CC off refuses nothing; CC on/devtools: a HOST (or code 3) access to "
                               "the protected words and an ENGINE write outside them reach no memory "
                               "port and answer ok 0, data 0; every other access reaches its word"),
                  ("firewall_open_cc_on", "the firewall refuses nothing in CC on (the audit's bug)"),
                  ("protected_end_short", "the protected region ends one word early (addr < protected - 1)")),
    *with_mutants(Property("cc_ctrl", "flr_scrub_closed", flr_scrub_closed, depth=DEPTH + 4,
                           induction=DEPTH + 1, params={"depth": DEPTH, "protected": PROTECTED},
                           doc="mem_req takes nothing in the reset/FLR cycle and the depth cycles after "
                               "it (the memory scrub)"),
                  ("scrub_short", "the scrub stops one word short (the last word keeps its data)"),
                  ("flr_no_scrub", "flr does not restart the scrub")),
    *with_mutants(Property("cc_ctrl", "flr_scrub_words", flr_scrub_words, depth=2 * DEPTH + 8,
                           params={"depth": DEPTH, "protected": PROTECTED},
                           depth_reason=f"reset, its {DEPTH}-cycle scrub, a write to the word, an FLR, "
                                        f"the {DEPTH}-cycle scrub after it, a read of the word and its "
                                        f"response: 2 x {DEPTH} + 6 steps (+2 spare)",
                           doc="after reset/FLR a word not written since reads zero (every word, any "
                               "initiator, observed through mem_resp only)"),
                  ("scrub_short", "the scrub stops one word short (the last word keeps its data)"),
                  ("flr_no_scrub", "flr does not restart the scrub")),
    *with_mutant(Property("cc_ctrl", "counters_saturate", counters_saturate, depth=2, induction=1,
                          params={"depth": DEPTH, "protected": PROTECTED},
                          doc="DEC_COUNT and FW_COUNT hold or count up by one unless reset or FLR: "
                              "they hold at 2^32 - 1"),
                 "counters_wrap", "the refusal counters count on past 2^32 - 1 (to 0)"),
    *with_mutant(Property("cc_ctrl", "key_output", key_output, depth=DEPTH + 4, induction=1,
                          params={"depth": DEPTH, "protected": PROTECTED},
                          doc="the key output is KEY0..7 as last written by an allowed firmware or "
                              "host write, word k at bits 32k..; zero after reset/FLR"),
                 "key_words_reversed", "KEY0 drives the top word of the key output"),
    *with_mutant(Property("cc_ctrl", "mode_store", mode_store, depth=DEPTH + 4, induction=1,
                          params={"depth": DEPTH, "protected": PROTECTED},
                          doc="store and active mode: mode_nv at power-on (3 as ON), an allowed "
                              "CC_MODE_SET other than 3 into the store, the store active at FLR; "
                              "a 3 sets CC_STATUS.bad_mode"),
                 "mode_set_3", "a CC_MODE_SET of 3 is stored"),
    *with_mutant(Property("cc_ctrl", "perf_counters", perf_counters, depth=2, induction=1,
                          params={"depth": DEPTH, "protected": PROTECTED},
                          doc="PERF_CYCLES/PERF_ACCESSES count cycles and taken requests while "
                              "enabled, hold otherwise, read zero in CC on and after reset/FLR"),
                 "perf_in_cc_on", "the performance counters run in CC on"),
    *with_mutants(Property("cc_dma", "commit_after_tag", dma_commit_order, depth=COMMIT_DEPTH,
                           params=DMA_C, depth_reason=COMMIT_DEPTH_REASON, fast=False,
                           doc="gcm_core abstracted: a write to protected memory only for a block of an "
                               "inbound frame whose tag matched (none for a frame whose tag failed)"),
                  ("commit_before_tag", "inbound plaintext written to wr as it leaves the engine"),
                  ("commit_on_tag_fail", "a frame whose tag failed is committed")),
    *with_mutants(Property("cc_dma", "commit_data", dma_commit_data, depth=DATA_DEPTH, params=DMA_C,
                           depth_reason=DATA_DEPTH_REASON, fast=False,
                           doc="gcm_core abstracted: the commit writes each authenticated block's "
                               "plaintext, in order"),
                  ("commit_stale_word", "the commit writes the staging read port's previous word")),
    *with_mutants(Property("cc_dma", "commit_frames", dma_commit_frames, depth=FRAMES_DEPTH, params=DMA_F,
                           depth_reason=FRAMES_DEPTH_REASON, fast=False,
                           doc="gcm_core abstracted, frames of 1 or 2 blocks: the commit writes each block "
                               "of a frame whose tag matched once, in order, at dst + k, with its "
                               "plaintext, none of another frame, and then the status (in order, code OK "
                               "exactly when the tag matched)"),
                  ("commit_addr_fixed", "every block of a committed frame is written to its first address"),
                  ("commit_one_short", "a commit ends one block early (the last block is never written)")),
    *with_mutants(Property("cc_dma", "iv_fresh", dma_iv, depth=IV_DEPTH, params=DMA_C,
                           depth_reason=IV_DEPTH_REASON, fast=False,
                           doc="gcm_core abstracted: every IV into the engine under one key is "
                               "installed-or-later, below 2^32 - 1, of its direction, and above the "
                               "last of its direction (no repeat, no wrap, replay refused)"),
                  ("ctr_wraps", "tx_next never marked spent after a bump: uses 2^32 - 1, wraps"),
                  ("tx_not_advanced", "tx_next not bumped when an outbound frame starts"),
                  ("replay_off_by_one", "the replay check accepts the last accepted counter")),
    *with_mutant(Property("cc_dma", "reset_scrub", dma_scrub, depth=N_DMA + 2, window=True, params=DMA,
                          doc=f"{N_DMA} cycles after reset the gcm_core contexts, its pipeline and the "
                              "channel key/IV state are scrubbed"),
                 "keep_key", "the reset does not clear gcm_core's context key", hook="gcm_core._formal_mutant"),
]
