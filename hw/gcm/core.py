"""``GcmCore``: the SXP AES-256-GCM engine (docs/gcm.md), one beat per cycle.

A beat carries ``lanes`` = L consecutive blocks of one frame (L = 1, 2, 4); the design
notes, with the figures, are in ``docs/gcm.md``. Pipeline (each stage moves when its
successor can take its contents: ``o.ready`` low stalls everything that is full)::

    key ─┐ round ┌ input stage ┐    AES256 (L lanes,   ┌ P: operands, ┐ ┌ F: fold ┐
         ├ robin ┤ ctx read,   ├ s0 ─ 1 key schedule, ──┤ ciphertexts, ├─┤ X, tag, ├ O ─ o
    i ───┘       └ err, update ┘      14 stages, meta)   └ H read-ahead ┘ └ writes  ┘

- Input stage (then ``s0``, the AES input register: the AES's first stage already holds
  a 22-level round, so nothing may sit in front of it). Per cycle one key install or one
  ``i`` beat. A key install writes the key, sets ``has_key``, clears ``active`` and sends
  the zero block (→ H). A beat reads its context (key, nonce, beat index *b*, flags),
  decides ``err`` and updates *b* / nonce / ``active`` at once, so the next beat on the
  same context in the next cycle sees it. *b* + 1 (and at L = 1 the block count *b* − 1)
  are stored beside *b*, computed when *b* is written: no adder sits between the context
  read and ``s0`` (the increment there made cc_dma's deepest path, 27 gate levels). Each
  context computes its own update from its own registers (an incrementer per context), so
  no ctx mux or adder sits between the input beat and a context register either (the
  mux-then-increment path made itx_device's deepest path, 25 levels).
  Lane *k* of beat *b* (IV beat: b = 0) encrypts counter L·b + 1 + k, except MAC's tag
  lane L−1, which encrypts J0 (→ E_K(J0)). ``meta``
  carries the input beat, the frame's data-block count L·b + L − 2 (for the length
  block), ctx, op, decrypt, err and install.
- P, the operand stage (at the AES output): output lanes before the tag (block ⊕ E_K(ctr),
  the IV block, the NOP beat, or 0 for err), the GHASH operands V (ciphertext lanes; 0 for
  the IV lane, the length block in the tag slot) and the tag mask. The context's X and
  powers of H are read here into ``x_r`` / ``pw`` (a cycle ahead of the fold), taking the
  values being written by the fold of the beat ahead when the contexts match. A key
  install loads its fresh H = E_K(0) instead, and V(L−1) = H² so that the fold makes H³.
- F, the fold (into ``O``, the output register): X' = (X ⊕ V0)·H^L ⊕ V1·H^(L−1) ⊕ … ⊕
  V(L−1)·H with L single-cycle multipliers (:mod:`hw.gcm.ghash`, ``karatsuba`` levels):
  the only loop, register → XOR → multiplier → XOR tree → register. IV / DATA store X',
  MAC outputs tag = X' ⊕ E_K(J0) in lane L−1 and clears X; the tag compare (tag ⊕
  received tag = X' ⊕ mask) is OR-reduced to 64 bits before ``O`` and finished after
  it: no early exit, the same logic for every tag.

Per context: key 256, nonce 96, beat index *b* and *b* + 1 (32 − log2 L bits each; at
L = 1 also *b* − 1), X 128, ``active``, ``has_key``, and H (128) — plus H³ (128) at L = 4.
H² and H⁴ are squares (linear: an XOR network) and are derived on the read-ahead path
instead of stored.

Arbitration: ``key`` and ``i`` alternate when both are valid (round robin, one bit), so
an install waits at most one beat and installs cannot starve ``i``.

Timing: ``latency`` = 1 (s0) + 14 (AES) + 1 (P) + 1 (O) = 17 cycles from an ``i``
transfer to ``o.valid`` with ``o.ready`` high; one key install or beat per cycle
sustained, any context order, the same context back to back included (key install then
IV included: the powers of a fresh H are bypassed into the read-ahead). ``o.ready`` low
stalls everything (``i.ready`` / ``key.ready`` fall in the same cycle): nothing is lost
or duplicated. Counter arithmetic uses kept parallel-prefix carries (:func:`hw.common.increment`).

Reset: flags, valids and the arbiter bit have ordinary resets. The wide registers
(context key, nonce, beat index, H, H³, X; s0, P, x_r, pw, O data) are reset-less and
written with zeros in the reset cycle through their normal write ports (enables forced
on, write data forced to zero: one gate per bit column, not per flop). ``key.ready`` /
``i.ready`` are low during reset and while the AES flushes itself afterwards (14 cycles).

Decisions the contract leaves open (the golden model :mod:`sw.gcm.model` does the same):
a key install abandons the context's open frame (idle, X cleared); an install to a ctx
>= ``contexts`` is ignored; an IV/DATA/MAC on such a ctx is ``err``. ``Op.NOP`` passes
any beat through unchanged and touches no context.
"""
from amaranth.hdl import Array, Cat, Const, Module, Mux, ResetSignal, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from hw.aes import AES256
from hw.common import increment

from .ghash import gf128_mul, gf128_square
from .layout import (
    BLOCK_BITS,
    CTX_BITS,
    KEY_BITS,
    Op,
    check_contexts,
    check_lanes,
    input_layout,
    key_layout,
    output_layout,
)

__all__ = ["GcmCore", "meta_layout"]

CTR_BITS = 32                       # GCM's inc32 counter: bytes 12..15 of the counter block
NONCE_BITS = BLOCK_BITS - CTR_BITS  # bytes 0..11
COUNT_BITS = CTR_BITS               # data blocks of a frame (for the length block)
J0_TAIL = 0x0100_0000               # bytes 12..15 = 00 00 00 01, as the bus-lane field value
TAG_OR_GROUPS = 64                  # tag compare: OR-reduced to 64 bits before O, rest after


def meta_layout(lanes=1):
    """The sideband a beat carries through the AES pipeline."""
    return data.StructLayout({
        "blk": BLOCK_BITS * lanes,  # the input beat (data, IV, tag slot or NOP payload)
        "count": COUNT_BITS,        # MAC: data blocks in the frame
        "ctx": CTX_BITS,
        "op": Op,
        "decrypt": 1,
        "err": 1,
        "install": 1,               # a key-install slot: AES lane 0 gives H
    })


def _operand_layout(lanes):
    # The P register: everything the fold needs that does not depend on X.
    return data.StructLayout({
        "early": BLOCK_BITS * lanes,  # output beat before the tag is added to lane L-1
        "v": BLOCK_BITS * lanes,      # GHASH operands V0 .. V(L-1)
        "mask": BLOCK_BITS,           # received tag ⊕ E_K(J0): tag_ok iff X' = mask
        "ctx": CTX_BITS,
        "op": Op,
        "err": 1,
        "install": 1,
        "x_write": 1,                 # the fold writes the context's X ...
        "fold": 1,                    # ... with X' (else with zero)
        "tag": 1,                     # lane L-1 gets X' added (a MAC without err)
        "check": 1,                   # tag_ok is the compare (a decrypt MAC without err)
    })


def _byteswap(v):
    return Cat(*(v[8 * k:8 * k + 8] for k in reversed(range(len(v) // 8))))


def _counter_block(nonce, ctr):
    # nonce ‖ [ctr]₃₂ big-endian: bytes 12..15 carry the counter MSB first
    return Cat(nonce, _byteswap(ctr))


def _len_block(count):
    # [len(A)]₆₄ ‖ [len(C)]₆₄ big-endian, len(A) = 0, len(C) = 128 · count bits
    bits = Cat(Const(0, 7), count, Const(0, 64 - 7 - COUNT_BITS))
    return Cat(Const(0, 64), _byteswap(bits))


def _lane(v, k):
    return v[BLOCK_BITS * k:BLOCK_BITS * (k + 1)]


class GcmCore(wiring.Component):
    """AES-256-GCM engine with *contexts* (1..16) physical key contexts and *lanes*
    (1, 2, 4) blocks per beat.

    Ports: ``key`` In stream {ctx: 4, key: 256}; ``i`` In stream {block: 128·lanes,
    ctx: 4, op: 2, decrypt: 1}; ``o`` Out stream {block: 128·lanes, ctx: 4, op: 2,
    tag_ok: 1, err: 1} (layouts in :mod:`hw.gcm.layout`). *karatsuba* sets the recursion
    depth of the GHASH multipliers (area against logic depth).
    """

    TAG_MUTANTS = ("compare_64", "compare_96", "stale_compare", "wrong_lane", "check_data",
                   "check_err", "ctx0_active")

    def __init__(self, contexts=16, lanes=1, *, karatsuba=4, _formal_mutant=None):
        self.contexts = check_contexts(contexts)
        # test-only seeded bugs for formal/ (never set in a design): the reset leaves the
        # contexts' "keep_h" H or "keep_key" key unscrubbed; the tag compare covers only
        # the low 64 / 96 bits ("compare_64", "compare_96"), takes the compare of the
        # beat before ("stale_compare"), compares lane 0 instead of the tag lane
        # ("wrong_lane"), also answers a DATA beat ("check_data") or a MAC refused with
        # err ("check_err"); the err decision reads context 0's active flag ("ctx0_active")
        if _formal_mutant not in (None, "keep_h", "keep_key", *self.TAG_MUTANTS):
            raise ValueError(f"unknown _formal_mutant {_formal_mutant!r}")
        self._formal_mutant = _formal_mutant
        self.lanes = check_lanes(lanes)
        if isinstance(karatsuba, bool) or not isinstance(karatsuba, int) or \
                not 0 <= karatsuba <= 5:
            raise ValueError(f"karatsuba must be an int in 0..5, not {karatsuba!r}")
        self.karatsuba = karatsuba
        super().__init__({
            "key": In(stream.Signature(key_layout(contexts))),
            "i": In(stream.Signature(input_layout(lanes))),
            "o": Out(stream.Signature(output_layout(lanes))),
        })
        self._aes = AES256(meta=meta_layout(lanes), lanes=lanes)
        self.latency = self._aes.latency + 3
        # cycles i.ready / key.ready stay low after reset (from the first cycle with rst
        # low): the AES's flush; the contexts are zeroed in the reset cycle itself
        self.flush_cycles = self._aes.flush_cycles
        self._beat_bits = CTR_BITS - (lanes.bit_length() - 1)   # beat index: 32 - log2 L

        # Per-context state (attributes so that testbenches can check the reset scrub):
        # input side key, nonce, beat index, flags; output side X, H (and H³ at L = 4).
        n = contexts
        self._c_key = [Signal(KEY_BITS, name=f"ctx{c}_key", reset_less=True) for c in range(n)]
        self._c_nonce = [Signal(NONCE_BITS, name=f"ctx{c}_nonce", reset_less=True)
                         for c in range(n)]
        self._c_beat = [Signal(self._beat_bits, name=f"ctx{c}_beat", reset_less=True)
                        for c in range(n)]
        self._c_beat1 = [Signal(self._beat_bits, name=f"ctx{c}_beat1", reset_less=True)
                         for c in range(n)]                                 # b + 1
        self._c_count = [Signal(self._beat_bits, name=f"ctx{c}_count", reset_less=True)
                         for c in range(n)] if lanes == 1 else []           # b − 1
        self._c_x = [Signal(BLOCK_BITS, name=f"ctx{c}_x", reset_less=True) for c in range(n)]
        self._c_h = [Signal(BLOCK_BITS, name=f"ctx{c}_h", reset_less=True) for c in range(n)]
        self._c_h3 = [Signal(BLOCK_BITS, name=f"ctx{c}_h3", reset_less=True)
                      for c in range(n)] if lanes == 4 else []
        self._c_active = Signal(n, name="ctx_active")
        self._c_has_key = Signal(n, name="ctx_has_key")

    def elaborate(self, platform):
        m = Module()
        m.submodules.aes = self._aes
        key_take, i_take = self._arbiter(m)
        self._input_stage(m, key_take, i_take)
        p_valid, p, x_r, pw = self._operand_stage(m)
        self._fold_stage(m, p_valid, p, x_r, pw)
        return m

    # ---- arbitration ---------------------------------------------------------------------
    def _arbiter(self, m):
        rst = ResetSignal()
        advance_in = self._aes.i.ready      # s0 moves into the AES (stall, AES flush)
        last_key = Signal()                 # the previous transfer was a key install
        key_pick = self.key.valid & ~(self.i.valid & last_key)
        m.d.comb += [
            self.key.ready.eq(advance_in & key_pick & ~rst),
            self.i.ready.eq(advance_in & ~key_pick & ~rst),
        ]
        key_take = self.key.valid & self.key.ready
        i_take = self.i.valid & self.i.ready
        with m.If(key_take):
            m.d.sync += last_key.eq(1)
        with m.Elif(i_take):
            m.d.sync += last_key.eq(0)
        return key_take, i_take

    # ---- input stage ---------------------------------------------------------------------
    def _input_stage(self, m, key_take, i_take):
        """Context read, err decision and update; the AES input register s0."""
        aes, n, lanes = self._aes, self.contexts, self.lanes
        rst = ResetSignal()
        ip, kp = self.i.payload, self.key.payload
        ictx = ip.ctx
        in_range = (ictx < n) if n < (1 << CTX_BITS) else Const(1)
        is_iv, is_data, is_mac = ip.op == Op.IV, ip.op == Op.DATA, ip.op == Op.MAC
        is_nop = ip.op == Op.NOP
        active = self._c_active.bit_select(ictx, 1)
        if self._formal_mutant == "ctx0_active":
            active = self._c_active[0]
        has_key = self._c_has_key.bit_select(ictx, 1)
        nonce = Signal(NONCE_BITS)
        beat = Signal(self._beat_bits)
        beat1 = Signal(self._beat_bits)          # beat + 1, stored
        m.d.comb += [  # an IV's data lanes already run under the nonce it brings
            nonce.eq(Mux(is_iv, _lane(ip.block, 0)[:NONCE_BITS], Array(self._c_nonce)[ictx])),
            beat.eq(Array(self._c_beat)[ictx]),
            beat1.eq(Array(self._c_beat1)[ictx]),
        ]
        tail_ok = _lane(ip.block, 0)[NONCE_BITS:] == J0_TAIL
        ok = Signal()
        m.d.comb += ok.eq(in_range & has_key &
                          Mux(is_iv, ~active & tail_ok, (is_data | is_mac) & active))

        # Beat index b (the IV beat is b = 0) and b + 1, for the lane counters L·b + 1 + k.
        b_now = Mux(is_iv, 0, beat)
        b_next = Mux(is_iv, 1, beat1)
        log_l = lanes.bit_length() - 1
        counters = [Cat(Const(k + 1, log_l), b_now) for k in range(lanes - 1)]
        counters.append(Mux(is_mac, 1, Cat(Const(0, log_l), b_next)))   # tag lane: J0
        count = Array(self._c_count)[ictx] if lanes == 1 else \
            Cat(Const(lanes - 2, log_l), beat)                            # L·b + L - 2
        self._write_input_contexts(m, key_take, tail_ok)

        # s0: the AES input register. Idle cycles and the reset cycle load zeros.
        s0_valid = Signal()
        s0_block = Signal(BLOCK_BITS * lanes, reset_less=True)
        s0_key = Signal(KEY_BITS, reset_less=True)
        s0_meta = Signal(meta_layout(lanes), reset_less=True)
        meta_op = Signal(meta_layout(lanes))
        m.d.comb += [
            meta_op.blk.eq(ip.block),
            meta_op.count.eq(count),
            meta_op.ctx.eq(ictx),
            meta_op.op.eq(ip.op),
            meta_op.decrypt.eq(ip.decrypt),
            meta_op.err.eq(~ok & ~is_nop),
        ]
        meta_key = Signal(meta_layout(lanes))
        m.d.comb += [meta_key.ctx.eq(kp.ctx), meta_key.install.eq(1)]
        aes_block = Cat(*(_counter_block(nonce, ctr) for ctr in counters))
        with m.If(aes.i.ready | rst):
            m.d.sync += [
                s0_valid.eq(key_take | i_take),
                s0_block.eq(Mux(i_take, aes_block, 0)),          # key install: E_K(0) = H
                s0_key.eq(Mux(key_take, kp.key, Mux(i_take, Array(self._c_key)[ictx], 0))),
                s0_meta.eq(Mux(key_take, meta_key, Mux(i_take, meta_op, 0))),
            ]
        m.d.comb += [
            aes.i.valid.eq(s0_valid),
            aes.i.payload.block.eq(s0_block),
            aes.i.payload.key.eq(s0_key),
            aes.i.payload.meta.eq(s0_meta),
        ]

    def _write_input_contexts(self, m, key_take, tail_ok):
        """Key, nonce, beat index and flags: written by installs and accepted beats.

        Each context decides from its own registers, not from the values the input stage
        read through the ctx mux: its own ``ok`` (has_key, active), and its next b, b + 1
        and b − 1 from its own b and b + 1 (an incrementer per context). The paths from
        the input beat into the context registers are then the op / ctx decode and the
        IV's J0 tail compare, with no 16-way mux or adder in series (that path was the
        deepest of itx_device, 25 gate levels)."""
        rst = ResetSignal()
        ip, kp = self.i.payload, self.key.payload
        ictx = ip.ctx
        is_iv, is_data, is_mac = ip.op == Op.IV, ip.op == Op.DATA, ip.op == Op.MAC
        i_take = self.i.valid & self.i.ready
        nonce_wd = Mux(rst, 0, _lane(ip.block, 0)[:NONCE_BITS])
        key_wd = Mux(rst, 0, kp.key)
        for c in range(self.contexts):
            active, has_key = self._c_active[c], self._c_has_key[c]
            ok = has_key & Mux(is_iv, ~active & tail_ok, (is_data | is_mac) & active)
            take = i_take & (ictx == c)
            beat_we = rst | (take & ok & (is_iv | is_data))
            # b + 2 as a kept net (a synthesis cut): without it ABC folds the write enable
            # into the incrementer as its carry-in (q + we), which puts the late enable
            # (i.ready, from o.ready) in series with the carry chain: 27 levels in gcm_core,
            # where enable and increment side by side, then a mux, take about 16.
            beat1 = self._c_beat1[c]
            beat2 = Signal(self._beat_bits, name=f"ctx{c}_beat2", attrs={"keep": 1})
            m.d.comb += beat2.eq(increment(m, beat1, f"ctx{c}_beat_inc"))
            with m.If(beat_we):
                m.d.sync += [
                    self._c_beat[c].eq(Mux(rst, 0, Mux(is_iv, 1, beat1))),
                    beat1.eq(Mux(rst, 0, Mux(is_iv, 2, beat2))),
                ]
                if self._c_count:
                    m.d.sync += self._c_count[c].eq(Mux(rst | is_iv, 0, self._c_beat[c]))
            with m.If(rst | (take & ok & is_iv)):
                m.d.sync += self._c_nonce[c].eq(nonce_wd)
            key_we = rst | (key_take & (kp.ctx == c))
            if self._formal_mutant == "keep_key":
                key_we = key_take & (kp.ctx == c) & ~rst
            with m.If(key_we):
                m.d.sync += self._c_key[c].eq(key_wd)
            with m.If(key_take):
                with m.If(kp.ctx == c):
                    m.d.sync += [self._c_has_key[c].eq(1), active.eq(0)]
            with m.Elif(take):
                with m.If(is_iv):
                    m.d.sync += active.eq(ok)             # open, or abandon IV-on-active
                with m.Elif(is_mac & ok):
                    m.d.sync += active.eq(0)

    # ---- P: operand stage ----------------------------------------------------------------
    def _operand_stage(self, m):
        """Output lanes, GHASH operands and tag mask from the AES output; read-ahead of X
        and the powers of H. Returns (valid, P register, x_r, [H¹ .. H^L] registers)."""
        aes, lanes = self._aes, self.lanes
        rst = ResetSignal()
        self._o_valid = Signal()
        self._advance_o = ~self._o_valid | self.o.ready
        p_valid = Signal()
        advance_p = ~p_valid | self._advance_o
        m.d.comb += aes.o.ready.eq(advance_p)
        take = aes.o.valid & advance_p
        om = aes.o.payload.meta
        ek = aes.o.payload.block            # E_K(counter blocks), E_K(J0) in a MAC's lane
        is_iv, is_data, is_mac = om.op == Op.IV, om.op == Op.DATA, om.op == Op.MAC
        is_nop = om.op == Op.NOP            # L-1, or H in an install's lane 0

        q = Signal(_operand_layout(lanes))
        early, v = [], []
        for k in range(lanes):
            blk, data_out = _lane(om.blk, k), _lane(om.blk, k) ^ _lane(ek, k)
            passes = is_nop | (is_iv if k == 0 else Const(0))  # the beat's block as it is
            tag_lane = is_mac if k == lanes - 1 else Const(0)
            early.append(Mux(om.err | om.install, 0,
                             Mux(passes, blk, Mux(tag_lane, _lane(ek, k), data_out))))
            cipher = Mux(om.decrypt, blk, data_out)
            if k == 0:
                cipher = Mux(is_iv, 0, cipher)
            if k == lanes - 1:
                cipher = Mux(is_mac, _len_block(om.count), cipher)
                if lanes == 4:      # an install makes H³ = H²·H in this lane's multiplier
                    cipher = Mux(om.install, gf128_square(m, _lane(ek, 0), "h2_new"), cipher)
            v.append(cipher)
        last = lanes - 1
        m.d.comb += [
            q.early.eq(Cat(*early)),
            q.v.eq(Cat(*v)),
            q.mask.eq(Mux(is_mac & ~om.install, _lane(om.blk, 0 if self._formal_mutant == "wrong_lane" else last)
                          ^ _lane(ek, last), 0)),
            q.ctx.eq(om.ctx),
            q.op.eq(om.op),
            q.err.eq(om.err),
            q.install.eq(om.install),
            q.x_write.eq(om.install | is_iv | ((is_data | is_mac) & ~om.err)),
            q.fold.eq((is_iv | is_data) & ~om.err & ~om.install),
            q.tag.eq(is_mac & ~om.err & ~om.install),
            q.check.eq(is_mac & ~om.err & ~om.install & om.decrypt),
        ]
        if self._formal_mutant == "check_data":
            m.d.comb += q.check.eq((is_mac | is_data) & ~om.err & ~om.install & om.decrypt)
        if self._formal_mutant == "check_err":
            m.d.comb += q.check.eq(is_mac & ~om.install & om.decrypt)
        p = Signal(_operand_layout(lanes), reset_less=True)
        with m.If(advance_p | rst):
            m.d.sync += [
                p_valid.eq(take),
                p.eq(Mux(take & ~rst, q, 0)),
            ]
        x_r, pw = self._read_ahead(m, take, advance_p, om, ek)
        return p_valid, p, x_r, pw

    def _read_ahead(self, m, take, advance_p, om, ek):
        """X and H¹ .. H^L of the beat entering P, read from its context, or taken from
        the fold writing the same context in this cycle (``self._fold_*``, set up here and
        driven by the fold stage). A key install loads its own new H."""
        rst = ResetSignal()
        lanes = self.lanes
        octx = om.ctx
        self._fold_x_we = Signal()          # the fold writes X of context _fold_ctx ...
        self._fold_x_fold = Signal()        # ... with X' (else zero)
        self._fold_h_we = Signal()          # the fold writes H (and H³) of _fold_ctx
        self._fold_ctx = Signal(CTX_BITS)
        self._fold_x = Signal(BLOCK_BITS)   # X'
        self._fold_h = Signal(BLOCK_BITS)   # the new H of an install in the fold
        self._fold_h3 = Signal(BLOCK_BITS)  # the new H³ (L = 4)
        same = self._fold_ctx == octx
        pw_load = take & ~rst & ~om.install & ~(om.op == Op.NOP)  # an IV folds lanes 1..
        load = pw_load & ~(om.op == Op.IV)                        # an IV starts from X = 0

        x_r = Signal(BLOCK_BITS, reset_less=True)
        x_bypass = load & same & self._fold_x_we & self._fold_x_fold
        x_other = Mux(load & ~(same & self._fold_x_we), Array(self._c_x)[octx], 0)
        h1 = Signal(BLOCK_BITS, name="h1_src")
        m.d.comb += h1.eq(Mux(take & ~rst & om.install, _lane(ek, 0),
                              Mux(~pw_load, 0, Mux(same & self._fold_h_we, self._fold_h,
                                                Array(self._c_h)[octx]))))
        pw = [Signal(BLOCK_BITS, name=f"pw{j}", reset_less=True) for j in range(1, lanes + 1)]
        src = [h1]
        if lanes >= 2:
            src.append(gf128_square(m, h1, "h2_src"))
        if lanes == 4:
            h3 = Mux(~pw_load, 0, Mux(same & self._fold_h_we, self._fold_h3,
                                   Array(self._c_h3)[octx]))
            src += [h3, gf128_square(m, src[1], "h4_src")]
        with m.If(advance_p | rst):
            m.d.sync += x_r.eq(Mux(x_bypass, self._fold_x, x_other))
            m.d.sync += [r.eq(s) for r, s in zip(pw, src)]
        return x_r, pw

    # ---- F: fold into O ------------------------------------------------------------------
    def _fold_stage(self, m, p_valid, p, x_r, pw):
        """X' = (X ⊕ V0)·H^L ⊕ … ⊕ V(L-1)·H; context X / H writes; the output register."""
        rst = ResetSignal()
        lanes, last = self.lanes, self.lanes - 1
        go = p_valid & self._advance_o      # the beat in P moves to O in this cycle
        prods = []
        for k in range(lanes):
            # a named signal: the multiplier reads every bit of it many times
            operand = Signal(BLOCK_BITS, name=f"ghash{k}_a" if lanes > 1 else "ghash_a")
            m.d.comb += operand.eq(_lane(p.v, k) ^ (x_r if k == 0 else 0))
            prods.append(gf128_mul(m, operand, pw[lanes - 1 - k], self.karatsuba,
                                   name=f"ghash{k}" if lanes > 1 else "ghash"))
        x_new = self._fold_x
        terms = prods
        while len(terms) > 1:               # balanced XOR tree of the lane products
            terms = [terms[i] ^ terms[i + 1] if i + 1 < len(terms) else terms[i]
                     for i in range(0, len(terms), 2)]
        m.d.comb += [
            x_new.eq(terms[0]),
            self._fold_ctx.eq(p.ctx),
            self._fold_x_we.eq(go & p.x_write),
            self._fold_x_fold.eq(p.fold),
            self._fold_h_we.eq(go & p.install),
            self._fold_h.eq(pw[0]),
            self._fold_h3.eq(prods[last]),  # install: V(L-1) = H², pw[0] = H
        ]
        x_wd = Mux(~rst & p.fold, x_new, 0)
        for c in range(self.contexts):
            hit = rst | (p.ctx == c)
            with m.If(hit & (rst | self._fold_x_we)):
                m.d.sync += self._c_x[c].eq(x_wd)
            h_we = hit & (rst | self._fold_h_we)
            if self._formal_mutant == "keep_h":
                h_we = (p.ctx == c) & self._fold_h_we & ~rst
            with m.If(h_we):
                m.d.sync += self._c_h[c].eq(Mux(rst, 0, pw[0]))
                if self._c_h3:
                    m.d.sync += self._c_h3[c].eq(Mux(rst, 0, prods[last]))
        self._output_register(m, go, p, x_new)

    def _output_register(self, m, go, p, x_new):
        """O: the tag added into lane L-1 (everything else was chosen in P); the tag
        compare OR-reduced to TAG_OR_GROUPS bits here and finished after the register."""
        rst = ResetSignal()
        lanes, last = self.lanes, self.lanes - 1
        block = Cat(*(_lane(p.early, k) for k in range(last)),
                    _lane(p.early, last) ^ Mux(p.tag, x_new, 0))
        diff = x_new ^ p.mask               # tag ⊕ received tag
        if self._formal_mutant in ("compare_64", "compare_96"):
            kept = int(self._formal_mutant[-2:])
            diff = Cat(diff[:kept], Const(0, BLOCK_BITS - kept))
        group = BLOCK_BITS // TAG_OR_GROUPS
        o_block = Signal(BLOCK_BITS * lanes, reset_less=True)
        o_ctx = Signal(CTX_BITS)
        o_op = Signal(Op)
        o_err = Signal()
        o_check = Signal()
        o_neq = Signal(TAG_OR_GROUPS)
        with m.If(self._advance_o | rst):
            m.d.sync += [
                self._o_valid.eq(go & ~p.install & ~rst),
                o_block.eq(Mux(rst, 0, block)),
                o_ctx.eq(p.ctx),
                o_op.eq(p.op),
                o_err.eq(p.err),
                o_check.eq(p.check),
                o_neq.eq(Cat(*(diff[group * g:group * (g + 1)].any()
                               for g in range(TAG_OR_GROUPS)))),
            ]
        m.d.comb += [
            self.o.valid.eq(self._o_valid),
            self.o.payload.block.eq(o_block),
            self.o.payload.ctx.eq(o_ctx),
            self.o.payload.op.eq(o_op),
            self.o.payload.err.eq(o_err),
            self.o.payload.tag_ok.eq(o_check & ~o_neq.any()),
        ]
        if self._formal_mutant == "stale_compare":
            neq_before = Signal(TAG_OR_GROUPS)      # the compare of the beat before
            with m.If(self._advance_o & go):
                m.d.sync += neq_before.eq(o_neq)
            m.d.comb += self.o.payload.tag_ok.eq(o_check & ~neq_before.any())
