"""Static bounds analysis over kernel descriptions: the compiler's part of GPUShield (Type 1).

GPUShield's compiler proves some memory instructions in bounds at compile time and gives
them Type 1 pointers, which the BCU does not check. This module is that analysis over a
*description* of a kernel (:class:`KernelDesc`), not over LLVM IR: the buffers it is given
(:class:`BufferDesc`, with the sizes the host allocates), the loop counters and thread
indices with their known ranges (:class:`Var`: trip counts, grid and block dimensions),
and one :class:`Access` per memory instruction — its buffer, element size, load or store,
an affine element index over those variables (:class:`Affine`) or ``None`` when the index
or the pointer is not affine (data-dependent gathers, neighbour lists, pointer arrays,
heap chunks), and the guards (``if lo <= expr <= hi``) the instruction sits under.

:func:`analyse` gives every access a :class:`Verdict`. An access is **proven** when
interval arithmetic bounds its byte range inside ``[0, buffer bytes)`` and it is not a
store to a read-only buffer; everything else stays Type 2 (checked by the BCU).

Soundness: at any point (an assignment of every variable inside its range that satisfies
the access's guards), an affine index ``e = c + Σ a_v v`` lies in
``[c + Σ min(a_v lo_v, a_v hi_v), c + Σ max(a_v lo_v, a_v hi_v)]`` (each term is monotone
in its one variable). Under a guard ``lo <= g <= hi`` it also lies in
``[lo, hi] ∩ range(g)`` + ``range(e - g)``, since ``e = g + (e - g)``; the analysis takes
the intersection (empty: the instruction never executes).
So if ``elem * (max + 1) <= bytes`` and ``elem * min >= 0``, every executed instance of the
instruction touches only bytes of its buffer. Integers are unbounded here: a description
must state index arithmetic as the kernel computes it without wrap-around.
"""
from dataclasses import dataclass

__all__ = ["Var", "loop", "Affine", "Guard", "BufferDesc", "Access", "KernelDesc", "Verdict",
           "analyse", "ELEM_BYTES"]

ELEM_BYTES = (1, 2, 4, 8)       # the BCU request's size_log2 is 0..3


def _check_int(what, value):
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"{what} must be an int, not {value!r}")
    return value


def _check_name(what, name):
    if not isinstance(name, str) or not name:
        raise ValueError(f"{what} must be a non-empty string, not {name!r}")
    return name


class _Arith:
    """Arithmetic that builds :class:`Affine` expressions (shared by Var and Affine)."""

    def __add__(self, other):
        return Affine.of(self)._add(Affine.of(other), 1)

    __radd__ = __add__

    def __sub__(self, other):
        return Affine.of(self)._add(Affine.of(other), -1)

    def __rsub__(self, other):
        return Affine.of(other)._add(Affine.of(self), -1)

    def __neg__(self):
        return Affine.of(self) * -1

    def __mul__(self, other):
        if not isinstance(other, int) or isinstance(other, bool):
            raise ValueError(f"{self} * {other}: only a product with an integer constant is affine")
        a = Affine.of(self)
        return Affine(a.const * other, tuple((v, c * other) for v, c in a.terms if c * other))

    __rmul__ = __mul__


@dataclass(frozen=True)
class Var(_Arith):
    """A loop counter or thread index taking every integer value in ``[lo, hi]``."""
    name: str
    lo: int
    hi: int

    def __post_init__(self):
        _check_name("variable name", self.name)
        _check_int(f"{self.name}.lo", self.lo)
        _check_int(f"{self.name}.hi", self.hi)
        if self.lo > self.hi:
            raise ValueError(f"variable {self.name}: empty range [{self.lo}, {self.hi}]")

    def __str__(self):
        return self.name


def loop(name, trips):
    """The counter of a loop of *trips* iterations (0 .. trips - 1)."""
    _check_int(f"trip count of {name}", trips)
    if trips < 1:
        raise ValueError(f"loop {name}: trip count {trips} < 1 (an empty loop has no accesses to prove)")
    return Var(name, 0, trips - 1)


@dataclass(frozen=True)
class Affine(_Arith):
    """``const + Σ coeff · var`` with integer coefficients; *terms* are ``(Var, coeff)``."""
    const: int = 0
    terms: tuple = ()

    def __post_init__(self):
        _check_int("constant", self.const)
        names = set()
        for v, c in self.terms:
            if not isinstance(v, Var):
                raise ValueError(f"affine term over {v!r}, not a Var")
            _check_int(f"coefficient of {v.name}", c)
            if v.name in names:
                raise ValueError(f"variable {v.name} twice in one affine form")
            names.add(v.name)

    @staticmethod
    def of(x):
        if isinstance(x, Affine):
            return x
        if isinstance(x, Var):
            return Affine(0, ((x, 1),))
        if isinstance(x, int) and not isinstance(x, bool):
            return Affine(x)
        raise ValueError(f"{x!r} is not an affine expression (int, Var or Affine)")

    def _add(self, other, sign):
        coeff = {v.name: [v, c] for v, c in self.terms}
        for v, c in other.terms:
            if v.name in coeff:
                if coeff[v.name][0] != v:
                    raise ValueError(f"two different variables named {v.name}")
                coeff[v.name][1] += sign * c
            else:
                coeff[v.name] = [v, sign * c]
        return Affine(self.const + sign * other.const, tuple((v, c) for v, c in coeff.values() if c))

    @property
    def vars(self):
        return [v for v, _ in self.terms]

    def bounds(self):
        """``(min, max)`` over the box of the variables' ranges (exact: each term is
        monotone in its own variable, so the corners attain both)."""
        lo = hi = self.const
        for v, c in self.terms:
            lo += min(c * v.lo, c * v.hi)
            hi += max(c * v.lo, c * v.hi)
        return lo, hi

    def __str__(self):
        parts = [f"{c}*{v.name}" if c != 1 else v.name for v, c in self.terms]
        if self.const or not parts:
            parts.append(str(self.const))
        return " + ".join(parts)


@dataclass(frozen=True)
class Guard:
    """The instruction executes only where ``lo <= expr <= hi`` (an ``if`` around it)."""
    expr: Affine
    lo: int
    hi: int

    def __post_init__(self):
        object.__setattr__(self, "expr", Affine.of(self.expr))
        _check_int("guard lo", self.lo)
        _check_int("guard hi", self.hi)
        if self.lo > self.hi:
            raise ValueError(f"guard {self.lo} <= {self.expr} <= {self.hi} never holds")


@dataclass(frozen=True)
class BufferDesc:
    """A buffer as the host allocates it: *bytes* long; *per_thread* = one such buffer
    per thread (local arrays), each indexed from its own base."""
    name: str
    bytes: int
    read_only: bool = False
    per_thread: bool = False

    def __post_init__(self):
        _check_name("buffer name", self.name)
        _check_int(f"size of buffer {self.name}", self.bytes)
        if self.bytes < 0:
            raise ValueError(f"buffer {self.name}: negative size {self.bytes}")


@dataclass(frozen=True)
class Access:
    """One memory instruction: *elem_bytes* at element *index* of *buffer* (byte offset
    ``elem_bytes * index``); *index* = ``None`` when it is not affine, with *why*."""
    name: str
    buffer: str
    elem_bytes: int
    index: object = None
    store: bool = False
    guards: tuple = ()
    why: str = ""

    def __post_init__(self):
        _check_name("access name", self.name)
        if self.elem_bytes not in ELEM_BYTES:
            raise ValueError(f"access {self.name}: element of {self.elem_bytes} bytes, not one of {ELEM_BYTES}")
        if self.index is None:
            if not self.why:
                raise ValueError(f"access {self.name}: a non-affine access must say why (why=...)")
        else:
            object.__setattr__(self, "index", Affine.of(self.index))
        if not all(isinstance(g, Guard) for g in self.guards):
            raise ValueError(f"access {self.name}: guards must be Guard objects")
        object.__setattr__(self, "guards", tuple(self.guards))


@dataclass(frozen=True)
class KernelDesc:
    """What the compiler knows about a kernel: buffers, variables, memory instructions."""
    name: str
    buffers: tuple
    vars: tuple
    accesses: tuple

    def __post_init__(self):
        _check_name("kernel name", self.name)
        for what, items, kind in (("buffer", self.buffers, BufferDesc), ("variable", self.vars, Var),
                                  ("access", self.accesses, Access)):
            names = [x.name for x in items if isinstance(x, kind)]
            if len(names) != len(items):
                raise ValueError(f"kernel {self.name}: every {what} must be a {kind.__name__}")
            dup = {n for n in names if names.count(n) > 1}
            if dup:
                raise ValueError(f"kernel {self.name}: {what} names used twice: {sorted(dup)}")
        buffers = {b.name for b in self.buffers}
        declared = set(self.vars)
        for a in self.accesses:
            if a.buffer not in buffers:
                raise ValueError(f"kernel {self.name}, access {a.name}: unknown buffer {a.buffer!r}")
            exprs = ([a.index] if a.index is not None else []) + [g.expr for g in a.guards]
            for e in exprs:
                for v in e.vars:
                    if v not in declared:
                        raise ValueError(f"kernel {self.name}, access {a.name}: variable {v} "
                                         f"[{v.lo}, {v.hi}] is not one of the kernel's variables")

    def access(self, name):
        for a in self.accesses:
            if a.name == name:
                return a
        raise KeyError(f"kernel {self.name} has no access {name!r}")

    def buffer(self, name):
        return next(b for b in self.buffers if b.name == name)


@dataclass(frozen=True)
class Verdict:
    """The analysis's answer for one access: *proven* (Type 1) or not, why, and the byte
    range ``[lo, hi)`` it may touch when the index is affine."""
    access: str
    proven: bool
    reason: str
    lo: int = None
    hi: int = None


def _index_range(a):
    """The interval of *a*'s index over its variables' box, narrowed by each guard."""
    lo, hi = a.index.bounds()
    for g in a.guards:
        # the values the guarded expression can take and the guard admits
        glo, ghi = g.expr.bounds()
        glo, ghi = max(glo, g.lo), min(ghi, g.hi)
        if glo > ghi:
            return 1, 0         # no point satisfies the guard
        dlo, dhi = (a.index - g.expr).bounds()
        lo, hi = max(lo, glo + dlo), min(hi, ghi + dhi)
    return lo, hi


def analyse(desc):
    """``{access name: Verdict}`` for every access of the :class:`KernelDesc` *desc*."""
    if not isinstance(desc, KernelDesc):
        raise ValueError(f"analyse() takes a KernelDesc, not {type(desc).__name__}")
    out = {}
    for a in desc.accesses:
        buf = desc.buffer(a.buffer)
        if a.index is None:
            out[a.name] = Verdict(a.name, False, f"not affine: {a.why}")
            continue
        if a.store and buf.read_only:
            # the BCU would reject it (cause 2); a Type 1 pointer would let it through
            out[a.name] = Verdict(a.name, False, f"store to read-only buffer {buf.name}")
            continue
        lo, hi = _index_range(a)
        if lo > hi:     # the guards exclude every point: the instruction never executes
            out[a.name] = Verdict(a.name, True, "never executes (guards exclude every iteration)")
            continue
        first, end = a.elem_bytes * lo, a.elem_bytes * (hi + 1)
        if first < 0:
            out[a.name] = Verdict(a.name, False, f"may underflow: byte {first} < 0", first, end)
        elif end > buf.bytes:
            out[a.name] = Verdict(a.name, False, f"may overflow: up to byte {end} > {buf.bytes}", first, end)
        else:
            out[a.name] = Verdict(a.name, True, f"bytes [{first}, {end}) of {buf.bytes}", first, end)
    return out
