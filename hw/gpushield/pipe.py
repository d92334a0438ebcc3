"""Small circuits shared by the BCU's pipeline stages (hw/gpushield/front.py, engine.py,
checker.py): a pipeline register with valid/ready, pointer-type decode, an adder of a small
constant that stays shallow, a 4-way min/max step. Every path of the BCU is kept within 24
gate levels (docs/gpushield.md); the depths quoted below are from Yosys + ABC on the
project's generic gates.
"""
from amaranth.hdl import Cat, Const, Mux, Signal, Value

from hw.common import increment, wire

from .layout import PtrType

__all__ = ["stage", "pointer_kind", "add_small", "reduce_spans"]


def stage(m, shape, valid_in, payload_in, name):
    """A pipeline register loaded from ``(valid_in, payload_in)`` whenever it is empty or
    its content moves on. Returns ``(valid, reg, ready, accept)``: the caller drives
    *ready* (the next stage takes ``reg`` this cycle) and feeds *accept* back upstream."""
    valid = Signal(name=f"{name}_valid")
    reg = Signal(shape, name=name)
    ready = Signal(name=f"{name}_ready")
    accept = wire(m, ~valid | ready, f"{name}_accept")
    with m.If(accept):
        m.d.sync += [valid.eq(valid_in), reg.eq(payload_in)]
    return valid, reg, ready, accept


def pointer_kind(m, ptr, name):
    """The pointer type, a Type 3 pointer whose reserved bits 61..54 are not zero counted
    as invalid."""
    t = Value.cast(ptr.type)
    bad_t3 = (t == PtrType.T3.value) & (ptr.meta.t3.reserved != 0)
    return wire(m, Mux(bad_t3, PtrType.INVALID.value, t), name)


def add_small(m, v, c, name):
    """``v + c`` with one more bit than *v*, for a *c* of at most 4 bits (an access size):
    a 4-bit add on the low bits and a log-depth increment of the rest, selected by its
    carry — about 9 gate levels for 48 bits where a generic adder maps to a ripple chain."""
    v, c = Value.cast(v), Value.cast(c)
    assert len(c) <= 4 < len(v)
    low = wire(m, v[:4] + c, f"{name}_low")               # 5 bits
    high = Cat(v[4:], Const(0, 1))
    bumped = wire(m, increment(m, high, f"{name}_inc"), f"{name}_bumped")
    return wire(m, Cat(low[:4], Mux(low[4], bumped, high)), name)


def _pick(m, spans, key, better, name):
    # One-hot choice of the best valid span (ties: the first, i.e. the lowest lanes):
    # span x wins if every other valid span y is not better than it. All pairwise
    # comparisons run in parallel, so four spans cost one comparator's depth plus a few
    # gates, where a tree of two 2-way steps would cost two comparators.
    n = len(spans)
    cmp = {(x, y): wire(m, better(getattr(spans[x], key), getattr(spans[y], key)),
                        f"{name}_{x}{y}")
           for x in range(n) for y in range(x + 1, n)}        # x (earlier) at least as good
    picks = []
    for x in range(n):
        beats = [~spans[y].any | (cmp[(x, y)] if x < y else ~cmp[(y, x)])
                 for y in range(n) if y != x]
        picks.append(wire(m, spans[x].any & Cat(*beats).all() if beats else spans[x].any,
                          f"{name}_pick{x}"))
    return picks


def _select(picks, values):
    out = 0
    for p, v in zip(picks, values):
        out = out | Mux(p, v, 0)
    return out


def reduce_spans(m, spans, layout, name):
    """Merge each run of up to four spans (views of ``span_layout``) into one: the lowest
    ``lo`` and the highest ``hi`` of the valid ones, ties to the lowest lanes. Returns the
    list of merged spans (named signals)."""
    out = []
    for g in range(0, len(spans), 4):
        group = spans[g:g + 4]
        merged = Signal(layout, name=f"{name}_{g // 4}")
        if len(group) == 1:
            m.d.comb += merged.eq(group[0])
        else:
            lo = _pick(m, group, "lo", lambda a, b: a <= b, f"{name}_{g // 4}_lo")
            hi = _pick(m, group, "hi", lambda a, b: a >= b, f"{name}_{g // 4}_hi")
            m.d.comb += [
                merged.any.eq(Cat(s.any for s in group).any()),
                merged.lo.eq(_select(lo, [s.lo for s in group])),
                merged.lane_lo.eq(_select(lo, [s.lane_lo for s in group])),
                merged.hi.eq(_select(hi, [s.hi for s in group])),
                merged.lane_hi.eq(_select(hi, [s.lane_hi for s in group])),
            ]
        out.append(merged)
    return out
