"""``gcm_core`` (hw/gcm): reset scrub of every key-bearing register; tag authentication.

gcm_core's wide registers have no reset: the reset cycle writes zeros into them through
their write ports (context key, nonce, beat index b and b ± 1, X, H, H³ at lanes 4; s0, P,
x_r, pw, O), and its AES flushes itself for ``flush_cycles`` cycles afterwards while ``key``/``i`` are
refused. Property ``reset_scrub``: from an arbitrary state, reset in the first cycle, any
inputs and later resets: ``GcmCore.flush_cycles`` cycles after the reset was last released
every reset-less register of gcm_core and of its AES (found by walking the elaborated
design) is zero — the AES's pipeline registers hold the zero-key public constants
(:func:`formal.aes.aes_scrub_value`).

Property ``tag_auth`` (lanes 1 and lanes 4, contexts 2): ``tag_ok`` is raised only on the
output beat of an accepted decrypt MAC, and only when the tag the engine outputs for that
frame (lane L−1 of that beat: X' ⊕ E_K(J0)) equals, in all 128 bits, the received MAC the
harness recorded from that beat's input. The harness keeps its own record: it follows one
input beat, chosen freely (``pick``), to its output by counting the beats ahead of it, and
decides whether it is accepted from its own model of each context's ``has_key`` /
``active`` (docs/gcm.md: misuse answers ``err``), not from the RTL's flags. On that output
beat it checks ctx and op (the right beat), ``err`` against the model, and the two
``tag_ok`` implications. **Abstraction**: the AES pipeline is replaced by a zero-latency
stage (:class:`AesAbstraction`) that passes the beat's meta through in order and whose
output block is a free value in every cycle — any function of its input, AES-256
included, even a non-deterministic one; so the key and the counter blocks sent into the
AES are not checked here. The GHASH fold, the context state, the read-ahead and bypass,
the tag lane and the 128-bit compare are the real RTL. Not proved here: that the tag the
engine outputs is GHASH_H(C) ⊕ E_K(J0) of the frame (an independent GHASH reference makes
the solver prove two 128-bit GF(2^128) multipliers equal, which did not finish; that
value is checked in simulation against OpenSSL and CAVP, tb/gcm). Bounded (``depth``):
the harness's position counter and model are not inductive.

Why no GHASH reference: :func:`multiplier_equivalence` is the one-cycle miter of the RTL's
multiplier (``gf128_mul``, Karatsuba depth 4) against SP 800-38D's Algorithm 1 for free
operands; Boolector had not answered it after 300 s (one BMC step). A reference tag would
need that equivalence once per beat of the frame, and at lanes 4 the RTL's
powers-of-H fold against the reference's block-by-block Horner form on top. It is not a
registered property.
"""
import functools

from amaranth.asserts import AnySeq
from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring

from hw.gcm import GcmCore
from hw.gcm.ghash import gf128_mul
from hw.gcm.layout import BLOCK_BITS, Op

from . import Harness, Property, discard, free_inputs, freeze, rtl_constant, with_mutant, with_mutants
from .aes import aes_scrub_value, scrub_checks

__all__ = ["PROPERTIES", "GCM_ROLES", "gcm_scrub_value", "AesAbstraction", "multiplier_equivalence"]

# J0 = nonce ‖ 00 00 00 01: bytes 12..15 of lane 0 of an IV beat, as the field value of bits 96..127
J0_TAIL = int.from_bytes(bytes([0, 0, 0, 1]), "little")

GCM_ROLES = {
    "context key": r"(^|\.)ctx\d+_key$",
    "H (hash key)": r"(^|\.)ctx\d+_h$",
    "X (partial hash)": r"(^|\.)ctx\d+_x$",
    "nonce (counter block)": r"(^|\.)ctx\d+_nonce$",
    "beat index (counter)": r"(^|\.)ctx\d+_(beat|beat1|count)$",
    "AES input key (s0)": r"(^|\.)s0_key$",
    "powers of H (read-ahead)": r"(^|\.)pw\d$",
    "E_K(J0) / tag mask, operands (P)": r"(^|\.)p$",
    "AES round keys": r"aes\.s\d+_key$",
    "AES state (E_K of counter blocks)": r"aes\.s\d+_state$",
}


def gcm_scrub_value(path, sig):
    """Zero, except the AES pipeline's zero-key constants."""
    parts = path.split(".")
    if len(parts) >= 2 and parts[-2] == "aes":
        return aes_scrub_value(parts[-1], len(sig))
    return 0


CONTEXTS, LANES = 2, 1


def reset_scrub(mutant=None, contexts=CONTEXTS, lanes=LANES):
    h = Harness()
    dut = GcmCore(contexts, lanes, _formal_mutant=mutant)
    frozen, fragment = freeze(dut)
    h.m.submodules.dut = frozen
    free_inputs(h.m, dut)
    n = rtl_constant(lambda: GcmCore(contexts, lanes), "flush_cycles")
    scrub_checks(h, fragment, n, lambda p, s: s.reset_less, gcm_scrub_value, GCM_ROLES)
    return h


N = rtl_constant(lambda: GcmCore(CONTEXTS, LANES), "flush_cycles")
PROPERTIES = [
    *with_mutant(Property("gcm_core", "reset_scrub", reset_scrub, depth=N + 2, window=True,
                          params={"contexts": CONTEXTS, "lanes": LANES},
                          doc=f"{N} cycles (GcmCore.flush_cycles) after reset every reset-less register "
                              "(context key/H/X/nonce/beat, s0, P, read-ahead, O, AES pipeline) is "
                              "scrubbed"),
                 "keep_h", "the reset does not clear the contexts' H"),
]


class AesAbstraction(wiring.Component):
    """Stands in for gcm_core's ``AES256``: the same signature, zero latency (``i.ready`` =
    ``o.ready``, ``o.valid`` = ``i.valid``), the meta passed through unchanged and the
    output block free (``AnySeq``) in every cycle: every function of the input block and
    key, AES included, is one of its behaviours."""

    def elaborate(self, platform):
        m = Module()
        block = self.o.payload.block
        m.d.comb += [
            self.i.ready.eq(self.o.ready),
            self.o.valid.eq(self.i.valid),
            self.o.payload.meta.eq(self.i.payload.meta),
            block.eq(AnySeq(len(block))),
        ]
        return m


def _spec_mul(m, a, b):
    # SP 800-38D Algorithm 1 on the block as a big-endian integer (x_0 = its MSB): Z ^= V for
    # each set bit of X, V = V >> 1, folding R = 11100001 || 0^120 in when a bit falls off
    def swap(v):
        return Cat(*(v[8 * k:8 * k + 8] for k in reversed(range(len(v) // 8))))
    x, z, v = swap(a), Const(0, BLOCK_BITS), swap(b)
    for i in range(BLOCK_BITS):
        z_next, v_next = Signal(BLOCK_BITS, name=f"spec_z{i}"), Signal(BLOCK_BITS, name=f"spec_v{i}")
        m.d.comb += [z_next.eq(Mux(x[BLOCK_BITS - 1 - i], z ^ v, z)),
                     v_next.eq(Mux(v[0], (v >> 1) ^ Const(0xE1 << 120, BLOCK_BITS), v >> 1))]
        z, v = z_next, v_next
    return swap(z)


def multiplier_equivalence(karatsuba=4):
    """The miter of ``hw.gcm.ghash.gf128_mul`` against :func:`_spec_mul` for free operands
    (not registered: see the module docstring)."""
    h = Harness(reset=False)
    a, b = h.any_seq(BLOCK_BITS, "a"), h.any_seq(BLOCK_BITS, "b")
    h.check("equal", gf128_mul(h.m, a, b, karatsuba, "rtl") == _spec_mul(h.m, a, b))
    return h


def _lane(value, k):
    return value[BLOCK_BITS * k:BLOCK_BITS * (k + 1)]


def tag_auth(mutant=None, contexts=CONTEXTS, lanes=LANES):
    h = Harness()
    m = h.m
    dut = GcmCore(contexts, lanes, _formal_mutant=mutant)
    discard(dut._aes)
    dut._aes = AesAbstraction(dut._aes.signature)
    m.submodules.dut = dut
    free_inputs(m, dut)
    ip, kp, o = dut.i.payload, dut.key.payload, dut.o.payload
    key_take = dut.key.valid & dut.key.ready
    i_take = dut.i.valid & dut.i.ready
    o_take = dut.o.valid & dut.o.ready

    # the harness's model of every context (docs/gcm.md, "Beats and frames": misuse is err)
    has_key = Signal(contexts, name="model_has_key")
    active = Signal(contexts, name="model_active")
    in_range = ip.ctx < contexts
    is_iv, is_data, is_mac = ip.op == Op.IV, ip.op == Op.DATA, ip.op == Op.MAC
    tail_ok = _lane(ip.block, 0)[96:] == J0_TAIL
    ctx_key = Mux(in_range, has_key.bit_select(ip.ctx[:max(1, (contexts - 1).bit_length())], 1), 0)
    ctx_active = Mux(in_range, active.bit_select(ip.ctx[:max(1, (contexts - 1).bit_length())], 1), 0)
    accepted = Signal(name="model_accepted")
    m.d.comb += accepted.eq(in_range & ctx_key &
                            Mux(is_iv, ~ctx_active & tail_ok, (is_data | is_mac) & ctx_active))
    for c in range(contexts):
        with m.If(key_take & (kp.ctx == c)):
            m.d.sync += [has_key[c].eq(1), active[c].eq(0)]
        with m.Elif(i_take & (ip.ctx == c)):
            with m.If(is_iv):
                m.d.sync += active[c].eq(accepted)      # opens, or abandons an open frame
            with m.Elif(is_mac & accepted):
                m.d.sync += active[c].eq(0)

    # one input beat, picked freely, followed to its output: `ahead` beats leave before it
    inflight = Signal(range(8), name="inflight")        # beats between i and o
    m.d.sync += inflight.eq(inflight + i_take - o_take)
    pick = h.any_seq(1, "pick")
    tracking = Signal(name="tracking")
    ahead = Signal(range(8), name="ahead")
    rec_ctx = Signal(4, name="rec_ctx")
    rec_op = Signal(Op, name="rec_op")
    rec_decrypt = Signal(name="rec_decrypt")
    rec_accepted = Signal(name="rec_accepted")
    rec_mac = Signal(BLOCK_BITS, name="rec_mac")       # the received tag: lane L-1 of the beat
    with m.If(~tracking & i_take & pick):
        m.d.sync += [tracking.eq(1), ahead.eq(inflight - o_take), rec_ctx.eq(ip.ctx),
                     rec_op.eq(ip.op), rec_decrypt.eq(ip.decrypt), rec_accepted.eq(accepted),
                     rec_mac.eq(_lane(ip.block, lanes - 1))]
    with m.Elif(tracking & o_take):
        with m.If(ahead == 0):
            m.d.sync += tracking.eq(0)
        with m.Else():
            m.d.sync += ahead.eq(ahead - 1)
    here = Signal(name="tracked_out")
    m.d.comb += here.eq(tracking & (ahead == 0) & dut.o.valid & ~h.rst)
    tag_ok = o.tag_ok
    h.check("same_beat", (o.ctx == rec_ctx) & (o.op == rec_op), guard=here)
    h.check("err_as_model", o.err == (~rec_accepted & (rec_op != Op.NOP)), guard=here)
    h.check("tag_ok_only_accepted_decrypt_mac",
            ~tag_ok | ((rec_op == Op.MAC) & rec_decrypt & rec_accepted), guard=here)
    h.check("tag_ok_only_matching_mac", ~tag_ok | (_lane(o.block, lanes - 1) == rec_mac), guard=here)
    h.notes.append(f"GcmCore({contexts}, {lanes}) with its AES256 replaced by AesAbstraction "
                   "(zero latency, meta passed through, output block free every cycle)")
    return h


TAG_AUTH_DEPTH = 9
TAG_AUTH_REASON = ("9 steps: the reset cycle, then a key install on each context, an IV on each, and a MAC "
                   "(step 5) whose output leaves 3 cycles later (s0, P, O) in step 8; or one context's install, "
                   "IV, two DATA beats and the MAC. Each further step costs the solver several times the one "
                   "before (lanes 1: step 7 40 s, step 8 4 minutes, step 9 unfinished after 5 more)")
PROPERTIES += [
    *with_mutants(Property("gcm_core", "tag_auth_l1", tag_auth, depth=TAG_AUTH_DEPTH,
                           params={"contexts": CONTEXTS, "lanes": 1}, depth_reason=TAG_AUTH_REASON, fast=False,
                           doc="tag_ok only on an accepted decrypt MAC whose output tag equals its "
                               "received MAC in all 128 bits (AES abstracted: free outputs)"),
                  ("compare_64", "the tag compare covers only the low 64 bits"),
                  ("stale_compare", "tag_ok takes the compare of the beat before"),
                  ("check_data", "tag_ok also answers a decrypt DATA beat (no MAC)"),
                  ("ctx0_active", "the err decision reads context 0's active flag")),
    *with_mutants(Property("gcm_core", "tag_auth_l4", functools.partial(tag_auth, lanes=4), depth=TAG_AUTH_DEPTH,
                           params={"contexts": CONTEXTS, "lanes": 4}, depth_reason=TAG_AUTH_REASON, fast=False,
                           doc="as tag_auth_l1 at lanes 4: the tag lane is lane 3"),
                  ("wrong_lane", "the compare takes the received tag from lane 0"),
                  ("compare_96", "the tag compare covers only the low 96 bits"),
                  ("check_err", "tag_ok also answers a MAC refused with err (no open frame)")),
]
