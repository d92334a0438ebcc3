"""``SHA384``: an iterative SHA-384 engine, one SHA-512 round per cycle (docs/sha.md).

A block is taken in one cycle (the schedule window and the working variables loaded), its
80 rounds run in the next 80, and the cycle after the last round adds the working
variables into the chaining value; that same cycle may take the next block, so blocks
follow each other every 81 cycles (``cycles_per_block``).

Longest path (the round): Σ/Ch/Maj, a carry-save tree that reduces the seven terms of
a' = h + K[t] + W[t] + Σ1(e) + Ch(e, f, g) + Σ0(a) + Maj(a, b, c) (and the six of
e' = d + T1) to two, then one 64-bit parallel-prefix carry-propagate adder. K[t] comes from a
register loaded one round ahead, so the constant table is not on that path.

Every register is reset to zero (a plain synchronous reset, no flush): after ``rst`` no
chaining value, schedule word, working variable, block or digest survives.
"""
from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from .layout import BLOCK_BITS, input_layout, output_layout

__all__ = ["SHA384", "IV", "K", "ROUNDS"]

ROUNDS = 80
WORD = 64
MASK = (1 << WORD) - 1

# FIPS 180-4 § 5.3.4 (SHA-384 initial hash value) and § 4.2.3 (SHA-512 constants); the
# golden model sw/sha derives both from primes and is checked against hashlib.
IV = (
    0xCBBB9D5DC1059ED8, 0x629A292A367CD507, 0x9159015A3070DD17, 0x152FECD8F70E5939,
    0x67332667FFC00B31, 0x8EB44A8768581511, 0xDB0C2E0D64F98FA7, 0x47B5481DBEFA4FA4,
)
K = (
    0x428A2F98D728AE22, 0x7137449123EF65CD, 0xB5C0FBCFEC4D3B2F, 0xE9B5DBA58189DBBC,
    0x3956C25BF348B538, 0x59F111F1B605D019, 0x923F82A4AF194F9B, 0xAB1C5ED5DA6D8118,
    0xD807AA98A3030242, 0x12835B0145706FBE, 0x243185BE4EE4B28C, 0x550C7DC3D5FFB4E2,
    0x72BE5D74F27B896F, 0x80DEB1FE3B1696B1, 0x9BDC06A725C71235, 0xC19BF174CF692694,
    0xE49B69C19EF14AD2, 0xEFBE4786384F25E3, 0x0FC19DC68B8CD5B5, 0x240CA1CC77AC9C65,
    0x2DE92C6F592B0275, 0x4A7484AA6EA6E483, 0x5CB0A9DCBD41FBD4, 0x76F988DA831153B5,
    0x983E5152EE66DFAB, 0xA831C66D2DB43210, 0xB00327C898FB213F, 0xBF597FC7BEEF0EE4,
    0xC6E00BF33DA88FC2, 0xD5A79147930AA725, 0x06CA6351E003826F, 0x142929670A0E6E70,
    0x27B70A8546D22FFC, 0x2E1B21385C26C926, 0x4D2C6DFC5AC42AED, 0x53380D139D95B3DF,
    0x650A73548BAF63DE, 0x766A0ABB3C77B2A8, 0x81C2C92E47EDAEE6, 0x92722C851482353B,
    0xA2BFE8A14CF10364, 0xA81A664BBC423001, 0xC24B8B70D0F89791, 0xC76C51A30654BE30,
    0xD192E819D6EF5218, 0xD69906245565A910, 0xF40E35855771202A, 0x106AA07032BBD1B8,
    0x19A4C116B8D2D0C8, 0x1E376C085141AB53, 0x2748774CDF8EEB99, 0x34B0BCB5E19B48A8,
    0x391C0CB3C5C95A63, 0x4ED8AA4AE3418ACB, 0x5B9CCA4F7763E373, 0x682E6FF3D6B2B8A3,
    0x748F82EE5DEFB2FC, 0x78A5636F43172F60, 0x84C87814A1F0AB72, 0x8CC702081A6439EC,
    0x90BEFFFA23631E28, 0xA4506CEBDE82BDE9, 0xBEF9A3F7B2C67915, 0xC67178F2E372532B,
    0xCA273ECEEA26619C, 0xD186B8C721C0C207, 0xEADA7DD6CDE0EB1E, 0xF57D4F7FEE6ED178,
    0x06F067AA72176FBA, 0x0A637DC5A2C898A6, 0x113F9804BEF90DAE, 0x1B710B35131C471B,
    0x28DB77F523047D84, 0x32CAAB7B40C72493, 0x3C9EBE0A15C9BEBC, 0x431D67C49C100D4C,
    0x4CC5D4BECB3E42B6, 0x597F299CFC657E2A, 0x5FCB6FAB3AD6FAEC, 0x6C44198C4A475817,
)


def _wire(m, value, name):
    # A named net for a value read more than once (Amaranth would copy a shared expression).
    signal = Signal(len(value), name=name)
    m.d.comb += signal.eq(value)
    return signal


def _bswap(v):
    # a 64-bit word with its bytes reversed: big-endian words <-> bus lane order
    return Cat(*[v[8 * (7 - k):8 * (8 - k)] for k in range(8)])


def _kept(m, value, name):
    # A net with the `keep` attribute: Yosys hands it to ABC as a cut point, so ABC's area
    # recovery cannot fold the carry-save tree or the prefix adder back into a ripple chain
    # (a 64-bit `+` measured 58 gate levels, a plain-logic prefix adder 41; hw/common/arith.py).
    signal = Signal(len(value), name=name, attrs={"keep": 1})
    m.d.comb += signal.eq(value)
    return signal


def _csa(m, x, y, z, name):
    """Carry-save addition of three 64-bit words: (sum, carry) with x + y + z = sum + carry
    (mod 2^64)."""
    s = _kept(m, x ^ y ^ z, f"{name}_s")
    c = _kept(m, Cat(Const(0, 1), ((x & y) | (x & z) | (y & z))[:WORD - 1]), f"{name}_c")
    return s, c


def _add(m, x, y, name):
    """x + y mod 2^64: a Sklansky parallel-prefix adder whose levels alternate polarity, so
    that each level is one inverting gate (AOI21 / OAI21, NAND2 / NOR2, or an inverter where
    a bit only passes through): 1 + 6 + 1 gate levels. Every level is a kept net."""
    p = _kept(m, x ^ y, f"{name}_p")
    # level 0 in inverted polarity: ~generate = NAND, ~transmit = NOR (transmit x | y
    # serves the carries as well as x ^ y does)
    g = _kept(m, ~(x & y), f"{name}_g0")
    t = _kept(m, ~(x | y), f"{name}_t0")
    inverted, span, level = True, 1, 0
    while span < WORD:
        ng, nt = [], []
        for i in range(WORD):
            if (i // span) % 2:             # combine with the group below: j is its top bit
                j = (i // span) * span - 1
                if inverted:    # from ~g, ~t: G = ~(~g_i & (~t_i | ~g_j)), T = ~(~t_i | ~t_j)
                    ng.append(~(g[i] & (t[i] | g[j])))
                    nt.append(~(t[i] | t[j]))
                else:           # from g, t: ~G = ~(g_i | (t_i & g_j)), ~T = ~(t_i & t_j)
                    ng.append(~(g[i] | (t[i] & g[j])))
                    nt.append(~(t[i] & t[j]))
            else:
                ng.append(~g[i])
                nt.append(~t[i])
        span, level, inverted = 2 * span, level + 1, not inverted
        # a group that reaches bit 0 needs no transmit any more
        nt = [Const(0, 1) if i < span else nt[i] for i in range(WORD)]
        g = _kept(m, Cat(*ng), f"{name}_g{level}")
        if span < WORD:
            t = _kept(m, Cat(*nt), f"{name}_t{level}")
    # g[i] is the carry out of bits 0..i, inverted if `inverted`
    if inverted:
        return Cat(p[0], ~(p[1:] ^ g[:WORD - 1]))
    return p ^ Cat(Const(0, 1), g[:WORD - 1])


def _big_sigma0(a):
    return a.rotate_right(28) ^ a.rotate_right(34) ^ a.rotate_right(39)


def _big_sigma1(e):
    return e.rotate_right(14) ^ e.rotate_right(18) ^ e.rotate_right(41)


def _small_sigma0(w):
    return w.rotate_right(1) ^ w.rotate_right(8) ^ (w >> 7)


def _small_sigma1(w):
    return w.rotate_right(19) ^ w.rotate_right(61) ^ (w >> 6)


class SHA384(wiring.Component):
    """SHA-384 over messages given as padded 1024-bit blocks.

    Attributes
    ----------
    i : In(stream.Signature({block: 1024, first: 1, last: 1}))
        One padded block per transfer; ``first`` starts from the initial hash value,
        ``last`` makes the block's result a digest on ``o``. A block without ``first``
        continues from the chaining value left by the block before it.
    o : Out(stream.Signature({digest: 384}))
        One digest after each block with ``last``.
    cycles_per_block : int
        Cycles between two accepted blocks when the next one is offered at once (81).
    latency : int
        Cycles from the transfer of a ``last`` block to its ``o.valid`` (82), ``o`` free.

    ``i.ready`` is high when no block is in its rounds and the result of the previous block
    can leave: a digest waits in ``o`` until taken, and the adding cycle after the last
    round of the next ``last`` block waits for it (``i.ready`` then low as well).
    """

    def __init__(self):
        super().__init__({
            "i": In(stream.Signature(input_layout())),
            "o": Out(stream.Signature(output_layout())),
        })
        self.cycles_per_block = ROUNDS + 1
        self.latency = ROUNDS + 2
        self._h = [Signal(WORD, name=f"h{j}") for j in range(8)]            # chaining value
        self._v = [Signal(WORD, name=f"v_{n}") for n in "abcdefgh"]         # working variables
        self._w = [Signal(WORD, name=f"w{j}") for j in range(16)]           # schedule window W[t..t+15]
        self._k = Signal(WORD, name="k")                                    # K[t]
        self._round = Signal(range(ROUNDS), name="round")
        self._busy = Signal(name="busy")            # a block is in its rounds
        self._fin = Signal(name="fin")              # the rounds are done; add into the chaining value
        self._last = Signal(name="last_block")      # the block in flight ends its message
        self._digest = Signal(384, name="digest")

    def elaborate(self, platform):
        m = Module()
        a, b, c, d, e, f, g, h = self._v
        w, k, t = self._w, self._k, self._round

        # --- one round: a' and e' from a carry-save tree and one adder each
        s1 = _wire(m, _big_sigma1(e), "sigma1")
        ch = _wire(m, (e & f) ^ (~e & g), "ch")
        s0 = _wire(m, _big_sigma0(a), "sigma0")
        maj = _wire(m, (a & b) ^ (a & c) ^ (b & c), "maj")
        hkw_s, hkw_c = _csa(m, h, k, w[0], "csa_hkw")           # registers only: ready first
        t1_s, t1_c = _csa(m, s1, ch, hkw_s, "csa_t1")            # T1 = t1_s + t1_c + hkw_c
        t2_s, t2_c = _csa(m, s0, maj, hkw_c, "csa_t2")           # T1 + T2 = t1_s + t1_c + t2_s + t2_c
        a_s, a_c = _csa(m, t1_s, t1_c, t2_s, "csa_a1")
        a_s, a_c = _csa(m, a_s, a_c, t2_c, "csa_a2")
        e_s, e_c = _csa(m, t1_s, t1_c, hkw_c, "csa_e1")
        e_s, e_c = _csa(m, e_s, e_c, d, "csa_e2")
        a_next = _wire(m, _add(m, a_s, a_c, "add_a"), "a_next")
        e_next = _wire(m, _add(m, e_s, e_c, "add_e"), "e_next")

        # --- schedule: W[t+16] = σ1(W[t+14]) + W[t+9] + σ0(W[t+1]) + W[t]
        ws_s, ws_c = _csa(m, _small_sigma1(w[14]), _small_sigma0(w[1]), w[9], "csa_w1")
        ws_s, ws_c = _csa(m, ws_s, ws_c, w[0], "csa_w2")
        w_new = _wire(m, _add(m, ws_s, ws_c, "add_w"), "w_new")

        # --- K[t+1] for the next round (K[0] when a block is taken)
        k_next = Signal(WORD, name="k_next")
        with m.Switch(t):
            for r in range(ROUNDS):
                with m.Case(r):
                    m.d.comb += k_next.eq(K[(r + 1) % ROUNDS])

        # --- the adding cycle: chaining value + working variables
        h_sum = [_wire(m, _add(m, self._h[j], self._v[j], f"add_h{j}"), f"h_sum{j}") for j in range(8)]
        finish = _wire(m, self._fin & (~self._last | ~self.o.valid | self.o.ready), "finish")
        m.d.comb += self.i.ready.eq(~self._busy & (~self._fin | finish))
        take = _wire(m, self.i.valid & self.i.ready, "take")
        first = self.i.payload.first
        # the chaining value a taken block continues from
        h_cur = [Mux(self._fin, h_sum[j], self._h[j]) for j in range(8)]
        h_init = [Mux(first, IV[j], h_cur[j]) for j in range(8)]

        with m.If(self._busy):
            m.d.sync += [
                a.eq(a_next), b.eq(a), c.eq(b), d.eq(c),
                e.eq(e_next), f.eq(e), g.eq(f), h.eq(g),
                Cat(w).eq(Cat(*w[1:], w_new)),
                k.eq(k_next),
                t.eq(t + 1),
            ]
            with m.If(t == ROUNDS - 1):
                m.d.sync += [self._busy.eq(0), self._fin.eq(1), t.eq(0)]
        with m.Elif(take):
            block = self.i.payload.block
            m.d.sync += [
                Cat(self._v).eq(Cat(*h_init)),
                Cat(w).eq(Cat(*[_bswap(block[WORD * j:WORD * (j + 1)]) for j in range(BLOCK_BITS // WORD)])),
                k.eq(K[0]),
                t.eq(0),
                self._busy.eq(1),
                self._last.eq(self.i.payload.last),
            ]

        with m.If(take):
            m.d.sync += Cat(self._h).eq(Cat(*h_init))
        with m.Elif(finish):
            m.d.sync += Cat(self._h).eq(Cat(*h_sum))
        with m.If(finish):
            m.d.sync += self._fin.eq(0)

        # --- the digest: the first six words of the final chaining value, bytes in order
        with m.If(finish & self._last):
            m.d.sync += [self._digest.eq(Cat(*[_bswap(x) for x in h_sum[:6]])), self.o.valid.eq(1)]
        with m.Elif(self.o.ready):
            m.d.sync += self.o.valid.eq(0)
        m.d.comb += self.o.payload.digest.eq(self._digest)
        return m
