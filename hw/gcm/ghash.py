"""Single-cycle GF(2^128) multiplier for GHASH (NIST SP 800-38D): combinational logic
built into a given Amaranth module.

Blocks are in bus lane order (byte *k* in bits ``8k+7..8k``). GHASH reads a block as a
polynomial with the first bit (the MSB of byte 0) as the coefficient of x^0, so the
coefficient of x^(8k+j) is bus bit ``8k + 7 - j``: :func:`reflect` is wiring only.

The carry-less product is built by Karatsuba recursion (``karatsuba`` levels: 3 products
of half width per level instead of 4) down to schoolbook products written as balanced
XOR trees of AND rows; the 255-bit product is then reduced modulo
x^128 + x^7 + x^2 + x + 1 by two folds. Each level of Karatsuba saves area and costs
gate levels; the multiplier alone, synthesised like ``scripts/synth.py`` does:

=========  ========  ===========
karatsuba  area GE   gate levels
=========  ========  ===========
0          49 600    11
1          38 000    13
2          29 900    15
3          24 600    16
4          21 900    18
=========  ========  ===========

Shared sub-products are named signals (:func:`_node`): built once, not re-expanded at
every use (which also keeps Amaranth's simulator fast).
"""
from amaranth.hdl import Cat, Const, Mux, Signal, Value

__all__ = ["reflect", "clmul", "gf128_reduce", "gf128_mul", "gf128_square", "xor_tree"]

GF_BITS = 128


def reflect(v):
    """Bus lane order <-> polynomial order (bit i = coefficient of x^i): reverse the bits
    of every byte. Its own inverse."""
    v = Value.cast(v)
    assert len(v) % 8 == 0
    return Cat(*(v[8 * k + 7 - j] for k in range(len(v) // 8) for j in range(8)))


def xor_tree(terms, width):
    """XOR of *terms* as a balanced tree, zero-extended or truncated to *width* bits."""
    terms = [Value.cast(t) for t in terms]
    if not terms:
        return Const(0, width)
    while len(terms) > 1:
        terms = [terms[i] ^ terms[i + 1] if i + 1 < len(terms) else terms[i]
                 for i in range(0, len(terms), 2)]
    t = terms[0]
    return t[:width] if len(t) >= width else t.as_unsigned()


def _node(m, name, width, expr):
    # A named comb signal, so that shared sub-results are built once (not re-expanded
    # wherever they are used) and show up in waveforms.
    s = Signal(width, name=name)
    m.d.comb += s.eq(expr)
    return s


def clmul(m, a, b, karatsuba=0, name="clmul"):
    """Carry-less product of equal-width *a* and *b* (n bits each): a 2n - 1 bit signal."""
    a, b = Value.cast(a), Value.cast(b)
    n = len(a)
    assert len(b) == n
    if karatsuba == 0 or n < 4:
        rows = [Mux(b[j], a, 0) << j for j in range(n)]   # a AND b[j]
        return _node(m, name, 2 * n - 1, xor_tree(rows, 2 * n - 1))
    h = (n + 1) // 2                      # low halves h bits, high halves n - h bits
    a0, a1, b0, b1 = a[:h], a[h:], b[:h], b[h:]
    sa = _node(m, f"{name}_sa", h, a0 ^ a1)
    sb = _node(m, f"{name}_sb", h, b0 ^ b1)
    z0 = clmul(m, a0, b0, karatsuba - 1, f"{name}_0")          # 2h - 1 bits
    z2 = clmul(m, a1, b1, karatsuba - 1, f"{name}_2")          # 2(n - h) - 1 bits
    z1 = clmul(m, sa, sb, karatsuba - 1, f"{name}_1")          # (a0 + a1)(b0 + b1)
    # p = z0 + x^h (z1 + z0 + z2) + x^2h z2, summed bit by bit as one balanced tree
    return _node(m, name, 2 * n - 1,
                 xor_tree([z0, z1 << h, z0 << h, z2 << h, z2 << 2 * h], 2 * n - 1))


def gf128_reduce(m, p, name="gfred"):
    """*p* (up to 255 bits, polynomial order) modulo x^128 + x^7 + x^2 + x + 1."""
    p = Value.cast(p)
    hi = p[GF_BITS:]
    t = _node(m, f"{name}_t", GF_BITS + 7,
              xor_tree([p[:GF_BITS], hi, hi << 1, hi << 2, hi << 7], GF_BITS + 7))
    hi2 = t[GF_BITS:]                     # at most 6 bits: the second fold cannot overflow
    return _node(m, name, GF_BITS,
                 xor_tree([t[:GF_BITS], hi2, hi2 << 1, hi2 << 2, hi2 << 7], GF_BITS))


def gf128_mul(m, a, b, karatsuba=2, name="gfmul"):
    """a·b in GF(2^128) with GHASH's bit order, built into module *m*; *a*, *b* and the
    returned 128-bit value in bus lane order."""
    p = clmul(m, reflect(a), reflect(b), karatsuba, f"{name}_p")
    return reflect(gf128_reduce(m, p, f"{name}_r"))


def gf128_square(m, a, name="gfsq"):
    """a² in GF(2^128), GHASH bit order, bus lane order in and out. Squaring is linear
    over GF(2) (the coefficient of x^i moves to x^2i, then the reduction folds): an XOR
    network of a few levels, no multiplier. Used for the powers H², H⁴ of the lanes."""
    a = Value.cast(a)
    if not isinstance(a, Signal):
        # Name the input first: slicing bits out of a nested expression (H⁴ = (H²)², whose
        # input is itself a reflected square) makes Amaranth's conversion re-walk the
        # whole expression per bit, which took minutes at lanes 4.
        a = _node(m, f"{name}_in", GF_BITS, a)
    # coefficient of x^i is bus bit 8·(i // 8) + 7 − i mod 8 (see reflect)
    spread = Cat(*(Cat(a[8 * (i // 8) + 7 - i % 8], Const(0, 1))
                   for i in range(GF_BITS)))[:2 * GF_BITS - 1]
    return reflect(gf128_reduce(m, spread, name))
