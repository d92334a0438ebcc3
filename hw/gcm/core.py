"""``GcmCore``: the SXP AES-256-GCM engine (DESIGN.md § gcm_core), one op per cycle.

Pipeline (every stage moves under one global stall, the AES pipeline's)::

    key ─┐ round  ┌ input stage ┐      AES256: 14 stages,      ┌ output stage ┐
         ├ robin ─┤ ctx read,   ├ s0 ─ meta carried in order ──┤ GHASH, tag,  ├ O ─ o
    i ───┘        └ err, update ┘      (+ ctx shadow line)     └ X/H write    ┘

- Input stage (then ``s0``, the AES input register: the AES's first stage already holds
  a 22-level round, so nothing may sit in front of it). Per cycle one key install or one
  ``i`` op. A key install writes the key, sets ``has_key``, clears ``active`` and sends the
  zero block (→ H). An op reads its context (key, nonce, counter, flags), decides ``err``
  and updates counter / nonce / ``active`` at once, so the next op on the same context in
  the next cycle sees it. AES input: DATA → nonce ‖ [ctr]₃₂; IV and MAC → J0 = nonce ‖ 1
  (unused for IV). ``meta`` carries the input block, ``ctr - 2`` (the block count, for the
  length block), ctx, op, decrypt, err and install.
- Output stage (at the AES output). A key-install slot writes H = E_K(0) and clears X.
  DATA: ``o.block`` = block ⊕ E_K(ctr) and X = (X ⊕ C)·H, C = the ciphertext (input block
  when decrypting, output block when encrypting). MAC: tag = ((X ⊕ len)·H) ⊕ E_K(J0),
  X cleared. IV: ``o.block`` = the IV block, X cleared (also after IV-on-active). err:
  ``o.block`` = 0, ``tag_ok`` = 0. One single-cycle GF(2^128) multiplier
  (:mod:`hw.gcm.ghash`, ``karatsuba`` levels of Karatsuba) serves DATA and MAC.
- X / H read-ahead: a 4-bit shadow of the AES pipeline (advancing with its global stall)
  names the context of the op that reaches the AES output at the next advance; its X and
  H are read one cycle early into ``x_r`` / ``h_r``, taking the value being written by
  the op at the output when the contexts match. The GHASH loop is register → XOR →
  multiplier → register, without the 16:1 read multiplexer in it.
- ``O``, the output register. ``o.block`` = (everything selected before the product is
  ready) ⊕ (product if MAC). The tag compare (tag ⊕ received MAC = product ⊕ block ⊕
  E_K(J0)) is OR-reduced to 64 bits before ``O`` and finished after it; no early exit,
  the same logic runs for every tag.

Per context (flip-flops): key 256, H 128, nonce 96, counter 32, X 128, active, has_key
= 642 bits. E_K(J0) is not stored (MAC sends J0 through the AES); the block count is
``counter - 2``.

Arbitration: ``key`` and ``i`` alternate when both are valid (round robin, one bit), so
an install waits at most one op and installs cannot starve ``i``.

Timing: ``latency`` = 1 (s0) + 14 (AES) + 1 (O) = 16 cycles from an ``i`` transfer to
``o.valid`` with ``o.ready`` high; one key install or op per cycle sustained, any context
order, the same context back to back included. ``o.ready`` low stalls everything
(``i.ready`` / ``key.ready`` fall in the same cycle): nothing is lost or duplicated.
Counter arithmetic uses kept parallel-prefix carries (:func:`_prefix_and`).

Reset: flags, valids and the arbiter bit have ordinary resets. The wide registers
(context key, nonce, counter, H, X; s0, x_r, h_r, O data) are reset-less and written
with zeros in the reset cycle through their normal write ports (enables forced on, write
data forced to zero: one gate per bit column, not per flop). ``key.ready`` / ``i.ready``
are low during reset and while the AES flushes itself afterwards (14 cycles).

Decisions where DESIGN.md is silent (the golden model :mod:`sw.gcm.model` does the same):
a key install abandons the context's open frame (idle, X cleared); an install to a ctx
>= ``contexts`` is ignored; an op on such a ctx, or with op code 3, is ``err``.
"""
from amaranth.hdl import Array, Cat, Const, Module, Mux, ResetSignal, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from hw.aes import AES256

from .ghash import gf128_mul
from .layout import (BLOCK_BITS, CTX_BITS, KEY_BITS, Op, check_contexts, input_layout,
                     key_layout, output_layout)

__all__ = ["GcmCore", "meta_layout"]

CTR_BITS = 32                       # GCM's inc32 counter: bytes 12..15 of the counter block
NONCE_BITS = BLOCK_BITS - CTR_BITS  # bytes 0..11
COUNT_BITS = CTR_BITS               # block count = ctr - 2
J0_TAIL = 0x0100_0000               # bytes 12..15 = 00 00 00 01, as the bus-lane field value
TAG_OR_GROUPS = 64                  # tag compare: OR-reduced to 64 bits before O, rest after

meta_layout = data.StructLayout({
    "blk": BLOCK_BITS,      # the op's input block (data, IV or received tag)
    "count": COUNT_BITS,    # MAC: data blocks in the frame
    "ctx": CTX_BITS,
    "op": Op,
    "decrypt": 1,
    "err": 1,
    "install": 1,           # a key-install slot: the AES output is H
})


def _byteswap(v):
    return Cat(*(v[8 * k:8 * k + 8] for k in reversed(range(len(v) // 8))))


def _prefix_and(m, bits, name):
    """Sklansky parallel prefix: ``out[i]`` = AND of ``bits[0..i]`` in log2(n) levels.

    Each level is a kept signal: left alone, ABC's area recovery folds any prefix
    computation back into a ripple chain (the counter paths here measured 28 gate levels
    that way)."""
    cur, n, span, level = list(bits), len(bits), 1, 0
    while span < n:
        nxt = [cur[i] & cur[(i // span) * span - 1] if (i // span) % 2 else cur[i]
               for i in range(n)]
        sig = Signal(n, name=f"{name}_l{level}", attrs={"keep": 1})
        m.d.comb += sig.eq(Cat(*nxt))
        cur, span, level = [sig[i] for i in range(n)], span * 2, level + 1
    return cur


def _increment(m, v, name):
    """v + 1 (mod 2^len(v)) with log-depth carries."""
    carry = _prefix_and(m, [v[i] for i in range(len(v) - 1)], name)
    return Cat(v[0] ^ 1, *(v[i] ^ carry[i - 1] for i in range(1, len(v))))


def _minus_two(m, v, name):
    """v - 2 (mod 2^len(v)) with log-depth borrows: bit 0 stays, bits 1.. decrement."""
    hi = v[1:]
    borrow = _prefix_and(m, [~hi[i] for i in range(len(hi) - 1)], name)
    return Cat(v[0], hi[0] ^ 1, *(hi[i] ^ borrow[i - 1] for i in range(1, len(hi))))


def _counter_block(nonce, ctr):
    # nonce ‖ [ctr]₃₂ big-endian: bytes 12..15 carry the counter MSB first
    return Cat(nonce, _byteswap(ctr))


def _len_block(count):
    # [len(A)]₆₄ ‖ [len(C)]₆₄ big-endian, len(A) = 0, len(C) = 128 · count bits
    bits = Cat(Const(0, 7), count, Const(0, 64 - 7 - COUNT_BITS))
    return Cat(Const(0, 64), _byteswap(bits))


class GcmCore(wiring.Component):
    """AES-256-GCM engine with *contexts* (1..16) physical key contexts.

    Ports: ``key`` In stream {ctx: 4, key: 256}; ``i`` In stream {block: 128, ctx: 4,
    op: 2, decrypt: 1}; ``o`` Out stream {block: 128, ctx: 4, op: 2, tag_ok: 1, err: 1}
    (layouts in :mod:`hw.gcm.layout`). *karatsuba* sets the recursion depth of the GHASH
    multiplier (area against logic depth).
    """

    def __init__(self, contexts=16, *, karatsuba=4):
        self.contexts = check_contexts(contexts)
        self.karatsuba = karatsuba
        super().__init__({
            "key": In(stream.Signature(key_layout(contexts))),
            "i": In(stream.Signature(input_layout)),
            "o": Out(stream.Signature(output_layout)),
        })
        self._aes = AES256(meta=meta_layout)
        assert self._aes.latency >= 2
        self.latency = self._aes.latency + 2

        # Per-context state (attributes so that testbenches can check the reset scrub):
        # input side key, nonce, counter, flags; output side H, X.
        n = contexts
        self._c_key = [Signal(KEY_BITS, name=f"ctx{c}_key", reset_less=True) for c in range(n)]
        self._c_nonce = [Signal(NONCE_BITS, name=f"ctx{c}_nonce", reset_less=True)
                         for c in range(n)]
        self._c_ctr = [Signal(CTR_BITS, name=f"ctx{c}_ctr", reset_less=True) for c in range(n)]
        self._c_h = [Signal(BLOCK_BITS, name=f"ctx{c}_h", reset_less=True) for c in range(n)]
        self._c_x = [Signal(BLOCK_BITS, name=f"ctx{c}_x", reset_less=True) for c in range(n)]
        self._c_active = Signal(n, name="ctx_active")
        self._c_has_key = Signal(n, name="ctx_has_key")

    def elaborate(self, platform):
        m = Module()
        m.submodules.aes = aes = self._aes
        n = self.contexts
        rst = ResetSignal()

        c_key, c_nonce, c_ctr = self._c_key, self._c_nonce, self._c_ctr
        c_h, c_x = self._c_h, self._c_x
        c_active, c_has_key = self._c_active, self._c_has_key

        # ---- arbitration -----------------------------------------------------------------
        advance_in = aes.i.ready            # s0 moves into the AES (global stall, AES flush)
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

        # ---- input stage -----------------------------------------------------------------
        ip, kp = self.i.payload, self.key.payload
        ictx = ip.ctx
        in_range = (ictx < n) if n < (1 << CTX_BITS) else Const(1)
        is_iv, is_data, is_mac = ip.op == Op.IV, ip.op == Op.DATA, ip.op == Op.MAC
        active = c_active.bit_select(ictx, 1)
        has_key = c_has_key.bit_select(ictx, 1)
        nonce = Signal(NONCE_BITS)
        ctr = Signal(CTR_BITS)
        m.d.comb += [nonce.eq(Array(c_nonce)[ictx]), ctr.eq(Array(c_ctr)[ictx])]
        tail_ok = ip.block[NONCE_BITS:] == J0_TAIL
        ok = Signal()
        m.d.comb += ok.eq(in_range & has_key &
                          Mux(is_iv, ~active & tail_ok, (is_data | is_mac) & active))

        ctr_we = rst | (i_take & ok & (is_iv | is_data))
        ctr_wd = Mux(rst, 0, Mux(is_iv, 2, _increment(m, ctr, "ctr_inc")))
        nonce_we = rst | (i_take & ok & is_iv)
        nonce_wd = Mux(rst, 0, ip.block[:NONCE_BITS])
        key_wd = Mux(rst, 0, kp.key)
        for c in range(n):
            with m.If(ctr_we & (rst | (ictx == c))):
                m.d.sync += c_ctr[c].eq(ctr_wd)
            with m.If(nonce_we & (rst | (ictx == c))):
                m.d.sync += c_nonce[c].eq(nonce_wd)
            with m.If(rst | (key_take & (kp.ctx == c))):
                m.d.sync += c_key[c].eq(key_wd)
            with m.If(key_take):
                with m.If(kp.ctx == c):
                    m.d.sync += [c_has_key[c].eq(1), c_active[c].eq(0)]
            with m.Elif(i_take & (ictx == c)):
                with m.If(is_iv):
                    m.d.sync += c_active[c].eq(ok)     # open, or abandon on IV-on-active
                with m.Elif(is_mac & ok):
                    m.d.sync += c_active[c].eq(0)

        # s0: the AES input register. Idle cycles and the reset cycle load zeros.
        s0_valid = Signal()
        s0_block = Signal(BLOCK_BITS, reset_less=True)
        s0_key = Signal(KEY_BITS, reset_less=True)
        s0_meta = Signal(meta_layout, reset_less=True)
        meta_op = Signal(meta_layout)
        m.d.comb += [
            meta_op.blk.eq(ip.block),
            meta_op.count.eq(_minus_two(m, ctr, "count")),
            meta_op.ctx.eq(ictx),
            meta_op.op.eq(ip.op),
            meta_op.decrypt.eq(ip.decrypt),
            meta_op.err.eq(~ok),
        ]
        meta_key = Signal(meta_layout)
        m.d.comb += [meta_key.ctx.eq(kp.ctx), meta_key.install.eq(1)]
        aes_block = Mux(is_data, _counter_block(nonce, ctr), Cat(nonce, Const(J0_TAIL, CTR_BITS)))
        with m.If(advance_in | rst):
            m.d.sync += [
                s0_valid.eq(key_take | i_take),
                s0_block.eq(Mux(i_take, aes_block, 0)),          # key install: E_K(0) = H
                s0_key.eq(Mux(key_take, kp.key, Mux(i_take, Array(c_key)[ictx], 0))),
                s0_meta.eq(Mux(key_take, meta_key, Mux(i_take, meta_op, 0))),
            ]
        m.d.comb += [
            aes.i.valid.eq(s0_valid),
            aes.i.payload.block.eq(s0_block),
            aes.i.payload.key.eq(s0_key),
            aes.i.payload.meta.eq(s0_meta),
        ]

        # ---- output stage ----------------------------------------------------------------
        o_valid = Signal()
        advance_out = ~o_valid | self.o.ready
        m.d.comb += aes.o.ready.eq(advance_out)
        aes_advance = ~aes.o.valid | aes.o.ready      # the AES global stall (its interface)
        o_take = aes.o.valid & advance_out
        om = aes.o.payload.meta
        ek = aes.o.payload.block            # E_K(counter block), E_K(J0) or H
        octx = om.ctx
        o_is_iv, o_is_data, o_is_mac = om.op == Op.IV, om.op == Op.DATA, om.op == Op.MAC

        # Read-ahead of X and H. A shadow of the AES pipeline (ctx only, advancing with its
        # global stall) names the op that reaches the AES output at the next advance; its
        # X and H are read one cycle early into x_r / h_r, bypassing the write of the op
        # at the output now (same context back to back). The GHASH loop is then
        # register → XOR → multiplier → register, without the 16:1 read multiplexer.
        shadow = [Signal(CTX_BITS, name=f"shadow{r}") for r in range(1, aes.latency)]
        with m.If(aes_advance):
            m.d.sync += shadow[0].eq(Mux(aes.i.valid & aes.i.ready, s0_meta.ctx, 0))
            m.d.sync += [shadow[r].eq(shadow[r - 1]) for r in range(1, len(shadow))]
        next_ctx = shadow[-1]

        x_r = Signal(BLOCK_BITS, reset_less=True)   # X of the op at the AES output
        h_r = Signal(BLOCK_BITS, reset_less=True)   # H of the op at the AES output
        data_out = Signal(BLOCK_BITS)
        m.d.comb += data_out.eq(om.blk ^ ek)
        cipher = Mux(om.decrypt, om.blk, data_out)
        operand = Signal(BLOCK_BITS)
        m.d.comb += operand.eq(x_r ^ Mux(o_is_mac, _len_block(om.count), cipher))
        prod = gf128_mul(m, operand, h_r, self.karatsuba, name="ghash")

        # X: DATA folds, MAC / IV / key install clear; H: key install
        x_we = o_take & (om.install | o_is_iv | ((o_is_data | o_is_mac) & ~om.err))
        x_wd = Signal(BLOCK_BITS)
        m.d.comb += x_wd.eq(Mux(~rst & ~om.install & o_is_data, prod, 0))
        h_we = o_take & om.install
        h_wd = Mux(rst, 0, ek)
        for c in range(n):
            with m.If(rst | (x_we & (octx == c))):
                m.d.sync += c_x[c].eq(x_wd)
            with m.If(rst | (h_we & (octx == c))):
                m.d.sync += c_h[c].eq(h_wd)
        same = octx == next_ctx
        with m.If(aes_advance | rst):
            m.d.sync += [
                x_r.eq(Mux(rst, 0, Mux(x_we & same, x_wd, Array(c_x)[next_ctx]))),
                h_r.eq(Mux(rst, 0, Mux(h_we & same, ek, Array(c_h)[next_ctx]))),
            ]

        # O: the output register. o.block = early ⊕ (prod if MAC): everything but the
        # product is selected before the product is ready.
        out = Signal()
        m.d.comb += out.eq(o_take & ~om.install & ~rst)
        tag_sel = out & o_is_mac & ~om.err
        early = Mux(out & ~om.err,
                    Mux(o_is_data, data_out, Mux(o_is_mac, ek, om.blk)), 0)
        # tag ⊕ received MAC = prod ⊕ E_K(J0) ⊕ blk = prod ⊕ data_out
        diff = prod ^ data_out
        o_block = Signal(BLOCK_BITS, reset_less=True)
        o_ctx = Signal(CTX_BITS)
        o_op = Signal(Op)
        o_err = Signal()
        o_check = Signal()                  # a decrypt MAC without err: tag_ok = tag matches
        o_neq = Signal(TAG_OR_GROUPS)
        group = BLOCK_BITS // TAG_OR_GROUPS
        with m.If(advance_out | rst):
            m.d.sync += [
                o_valid.eq(out),
                o_block.eq(early ^ Mux(tag_sel, prod, 0)),
                o_ctx.eq(octx),
                o_op.eq(om.op),
                o_err.eq(om.err),
                o_check.eq(tag_sel & om.decrypt),
                o_neq.eq(Cat(*(diff[group * g:group * (g + 1)].any()
                               for g in range(TAG_OR_GROUPS)))),
            ]
        m.d.comb += [
            self.o.valid.eq(o_valid),
            self.o.payload.block.eq(o_block),
            self.o.payload.ctx.eq(o_ctx),
            self.o.payload.op.eq(o_op),
            self.o.payload.err.eq(o_err),
            self.o.payload.tag_ok.eq(o_check & ~o_neq.any()),
        ]
        return m
