"""Log-depth adders, incrementers and comparators whose depth survives synthesis.

Yosys maps ``+`` and ``<`` to carry chains and ABC's area recovery folds a prefix network
written as plain logic back into a ripple chain (a 32-bit compare measured 30+ gate levels
that way). Here every level of the Sklansky parallel prefix is a signal with the ``keep``
attribute, which ABC cannot restructure across: n bits cost log2(n) levels of AND-OR.
"""
from amaranth.hdl import Cat, Const, Signal, Value

__all__ = ["prefix_and", "prefix_carries", "increment", "decrement", "add", "at_least", "at_most"]


def _kept(m, bits, name):
    sig = Signal(len(bits), name=name, attrs={"keep": 1})
    m.d.comb += sig.eq(Cat(*bits))
    return [sig[i] for i in range(len(bits))]


def prefix_and(m, bits, name):
    """``out[i]`` = AND of ``bits[0..i]`` in log2(n) kept levels."""
    cur, n, span, level = list(bits), len(bits), 1, 0
    while span < n:
        cur = _kept(m, [cur[i] & cur[(i // span) * span - 1] if (i // span) % 2 else cur[i]
                        for i in range(n)], f"{name}_l{level}")
        span, level = span * 2, level + 1
    return cur


def prefix_carries(m, g, p, name):
    """Sklansky prefix over generate/propagate pairs: ``out[i]`` = carry out of bits 0..i
    (carry in 0; fold a carry in into ``g[0]``)."""
    g, p, n, span, level = list(g), list(p), len(g), 1, 0
    while span < n:
        ng, np_ = [], []
        for i in range(n):
            if (i // span) % 2:
                j = (i // span) * span - 1
                ng.append(g[i] | (p[i] & g[j]))
                np_.append(p[i] & p[j])
            else:
                ng.append(g[i])
                np_.append(p[i])
        g = _kept(m, ng, f"{name}_g{level}")
        p = _kept(m, np_, f"{name}_p{level}")
        span, level = span * 2, level + 1
    return g


def increment(m, v, name):
    """``v + 1`` modulo ``2**len(v)``."""
    v = Value.cast(v)
    if len(v) == 1:
        return ~v
    carry = prefix_and(m, [v[i] for i in range(len(v) - 1)], name)
    return Cat(v[0] ^ 1, *(v[i] ^ carry[i - 1] for i in range(1, len(v))))


def add(m, a, b, width, name):
    """``a + b`` (unsigned) truncated to *width* bits (``width`` = max + 1 keeps the carry)."""
    a, b = Value.cast(a), Value.cast(b)
    a = a.as_unsigned() if len(a) >= width else Cat(a, Const(0, width - len(a)))
    b = b.as_unsigned() if len(b) >= width else Cat(b, Const(0, width - len(b)))
    g = [a[i] & b[i] for i in range(width)]
    p = [a[i] ^ b[i] for i in range(width)]
    c = prefix_carries(m, g, p, name)
    return Cat(p[0], *(p[i] ^ c[i - 1] for i in range(1, width)))


def at_least(m, a, b, name):
    """``a >= b`` (unsigned, equal widths after zero extension): the carry out of
    ``a + ~b + 1``."""
    a, b = Value.cast(a), Value.cast(b)
    n = max(len(a), len(b))
    a, b = Cat(a, Const(0, n - len(a))), Cat(b, Const(0, n - len(b)))
    nb = ~b
    g = [a[i] & nb[i] for i in range(n)]
    p = [a[i] ^ nb[i] for i in range(n)]
    g[0] = g[0] | p[0]                      # carry in 1
    return prefix_carries(m, g, p, name)[n - 1]


def at_most(m, a, b, name):
    """``a <= b`` (unsigned)."""
    return at_least(m, b, a, name)


def decrement(m, v, name):
    """``v - 1`` modulo ``2**len(v)``, log-depth borrows: ``~(~v + 1)``."""
    return ~increment(m, ~Value.cast(v), name)
