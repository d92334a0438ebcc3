"""Formal properties of the RTL (``make formal``; what is proved and how: docs/formal.md).

Each block module (:mod:`formal.aes`, :mod:`formal.gcm`, :mod:`formal.sxp`, :mod:`formal.cc`,
:mod:`formal.gpushield`, :mod:`formal.pcie`, :mod:`formal.rts`) lists :class:`Property` objects. A property builds a
:class:`Harness`: an Amaranth module with the design under test as a submodule, its inputs
driven by free values (``AnySeq``), assumptions on the environment and named checks
(``Assert``). ``scripts/formal.py`` lowers the harness through ``amaranth.back.rtlil`` and
the PyPI Yosys (``prep; async2sync; chformal -lower; dffunmap; write_smt2``) and proves it
with ``yosys-smtbmc`` (bounded model checking, and k-induction where it closes).

Conventions of every harness:

- The initial state is arbitrary: the runner strips the ``init`` values of all flip-flops,
  so the first cycle starts from any state of the design (and of the harness's own
  registers). The harness drives the ``sync`` domain's reset: high in the first cycle
  (``Initial()``), free afterwards unless the property says otherwise.
- A check is a named 1-bit signal ``chk_<name>`` (asserted high every cycle, the guard
  folded in), so a counterexample trace shows which check failed.
- A mutant is the same harness on the design built with a test-only constructor hook
  (``_formal_mutant=...``, off by default and never set in ``hw/designs.py``); the
  prover must reject it.
"""
import functools
from dataclasses import dataclass, field, replace
from typing import Callable

from amaranth.asserts import AnyConst, AnySeq, Initial
from amaranth.hdl import Assert, Assume, ClockDomain, Elaboratable, Fragment, Module, Signal, Value
from amaranth.lib import wiring

__all__ = ["Property", "with_mutant", "with_mutants", "Harness", "Frozen", "registers", "free_inputs", "Stub", "BLOCKS",
           "all_properties"]

BLOCKS = ("aes", "gcm", "sxp", "cc", "gpushield", "pcie", "rts")   # formal/<block>.py, in report order


@dataclass
class Property:
    """One property of one design.

    ``build()`` returns a :class:`Harness`. ``depth``: BMC steps (cycles from the first).
    ``induction``: also run k-induction with this many steps (``None``: not attempted).
    ``window``: the checks only look at the last ``depth`` cycles after a reset that the
    harness forces in the first cycle from an arbitrary state, so a passing BMC of
    ``depth`` steps is already a proof (see docs/formal.md, "complete by window").
    A property with ``induction`` or ``window`` is meant to be *proved*: an induction that
    does not close is a failure, not a bounded result. One with neither is *bounded*, and
    ``depth_reason`` must say why ``depth`` reaches the behaviour it checks.
    ``mutant``: a design with a seeded bug that the prover must reject.
    ``fast``: part of the subset that ``make test`` runs (``scripts/formal.py --fast``).
    ``block``: the formal/ module that defines it (set by :func:`all_properties`).
    """
    design: str
    name: str
    build: Callable
    depth: int
    induction: int | None = None
    window: bool = False
    mutant: bool = False
    params: dict = field(default_factory=dict)
    doc: str = ""
    depth_reason: str = ""
    fast: bool = True
    block: str = ""

    @property
    def key(self):
        return f"{self.design}/{self.name}"

    @property
    def meant_proved(self):
        return bool(self.induction) or self.window


def with_mutant(prop, mutant, doc, hook="_formal_mutant"):
    """``[prop, its mutant]``: the same checks (depth, induction, window) on the design with
    the seeded bug *mutant*, which the prover must reject. Its build is
    ``prop.build(mutant)``; its parameters are *prop*'s plus ``hook: mutant``, where *hook*
    names the constructor that takes the ``_formal_mutant`` argument (``"TrustGate._formal_mutant"``
    for a submodule); *doc* says what the bug is."""
    return with_mutants(prop, (mutant, doc, hook))


def with_mutants(prop, *mutants):
    """``[prop, mutant, mutant, …]`` for several seeded bugs, each ``(name, doc)`` or
    ``(name, doc, hook)`` as in :func:`with_mutant`."""
    if not mutants:
        raise ValueError(f"{prop.key}: a property needs at least one mutant")
    out = [prop]
    for mutant in mutants:
        name, doc, hook = (*mutant, "_formal_mutant") if len(mutant) == 2 else mutant
        out.append(replace(prop, name=f"{prop.name}.mutant_{name}", build=functools.partial(prop.build, name),
                           mutant=True, params={**prop.params, hook: name}, doc=doc))
    return out


class Frozen(Elaboratable):
    """An already elaborated fragment, so that the harness can name signals that live
    inside ``elaborate()`` (a second elaboration would make new ones)."""

    def __init__(self, fragment):
        self.fragment = fragment

    def elaborate(self, platform):
        return self.fragment


def freeze(dut):
    """``(Frozen(fragment), fragment)`` of a component, elaborated once."""
    fragment = Fragment.get(dut, None)
    return Frozen(fragment), fragment


def registers(fragment, prefix=""):
    """Every signal assigned in a clocked domain anywhere in *fragment*'s hierarchy, as
    ``[(path, signal)]``, path = ``submodule.submodule.signal_name`` (``name#2``, ``#3`` …
    for a second and third signal of one name in one module, e.g. unnamed ``$signal``)."""
    found, seen = [], {}
    for domain, stmts in fragment.statements.items():
        if domain == "comb":
            continue
        # (a stable sort: unnamed "$signal"s keep the order of the statements)
        for sig in sorted(stmts._lhs_signals(), key=lambda s: s.name):
            count = seen[sig.name] = seen.get(sig.name, 0) + 1
            found.append((prefix + sig.name + (f"#{count}" if count > 1 else ""), sig))
    for index, (sub, name, _src) in enumerate(fragment.subfragments):
        found += registers(sub, f"{prefix}{name if name is not None else f'U{index}'}.")
    return found


def submodule(fragment, path):
    """The elaboratable (e.g. a component) that was elaborated into the submodule at *path*
    (``"engine"``, ``"a.b"``) of *fragment*."""
    for name in path.split("."):
        for sub, sub_name, _ in fragment.subfragments:
            if sub_name == name:
                fragment = sub
                break
        else:
            raise KeyError(f"no submodule {name!r} in {path!r}")
    return fragment.origins[0]


def free_inputs(m, dut, skip=()):
    """Drive every input port of component *dut* with a free value (``AnySeq``), except
    the port paths in *skip* (tuples, as ``signature.flatten`` gives them)."""
    for path, member, value in dut.signature.flatten(dut):
        if member.flow == wiring.In and path not in skip:
            value = Value.cast(value)
            m.d.comb += value.eq(AnySeq(len(value)))


class Stub(wiring.Component):
    """A component with *signature* whose outputs are free (``AnySeq``) and whose inputs
    are ignored: the sound abstraction of a block the property does not depend on. With
    *drivers* (``{path: value}``) the outputs take those values instead, so that two stubs
    can share one free environment (a miter)."""

    def __init__(self, signature, drivers=None):
        self._drivers = drivers
        super().__init__(signature)

    def elaborate(self, platform):
        m = Module()
        for path, member, value in self.signature.flatten(self):
            if member.flow == wiring.Out:
                value = Value.cast(value)
                src = AnySeq(len(value)) if self._drivers is None else self._drivers[path]
                m.d.comb += value.eq(src)
        return m

    @staticmethod
    def shared_drivers(signature, name):
        """``{path: Signal}`` for every output of a component of *signature*: pass it as
        *drivers* to several stubs so that they drive the same values (the caller drives
        the signals, e.g. from ``AnySeq``)."""
        iface = signature.create(path=(name,))
        return {path: value for path, member, value in signature.flatten(iface)
                if member.flow == wiring.Out}


class Harness:
    """The module a property is proved on.

    - ``m``: the Amaranth module (add the design with ``m.submodules``);
    - ``rst``: the ``sync`` reset, high in the first cycle and free afterwards (with
      ``reset=False``: never high; the harness then assumes the initial state it needs;
      with ``reset="free"``: free in every cycle, the first one too, so that the first
      transition starts from any state of the design);
    - :meth:`check` adds a named assertion, :meth:`assume` an assumption;
    - :meth:`since`: cycles since the reset was last released;
    - ``notes``: lines the runner writes to ``harness.txt`` in the work folder (e.g. the
      registers a scrub property covers, found by walking the design).
    """

    def __init__(self, reset=True):
        # identity, not equality: 1 == True, and a 1 is more likely a slip than a choice
        if reset is not True and reset is not False and reset != "free":
            raise ValueError(f"reset must be True, False or \"free\", not {reset!r}")
        self.m = m = Module()
        m.domains.sync = self.domain = ClockDomain("sync")
        self.rst = self.domain.rst
        self.first = Signal(name="first_cycle")
        m.d.comb += self.first.eq(Initial())
        self.rst_in = Signal(name="rst_in")
        if reset == "free":
            m.d.comb += [self.rst_in.eq(AnySeq(1)), self.rst.eq(self.rst_in)]
        elif reset:
            m.d.comb += [self.rst_in.eq(AnySeq(1)), self.rst.eq(self.first | self.rst_in)]
        else:           # no reset at all: the harness assumes its own initial state
            m.d.comb += [self.rst_in.eq(0), self.rst.eq(0)]
        self.checks = []
        self.notes = []
        self._since = None

    def check(self, name, cond, guard=None):
        """Assert *cond* in every cycle where *guard* holds (every cycle after the first
        when *guard* is None: the first cycle is the reset cycle from an arbitrary
        state)."""
        ok = Signal(name=f"chk_{name}")
        guard = ~self.first if guard is None else (guard & ~self.first)
        self.m.d.comb += [ok.eq(~guard | cond), Assert(ok)]
        self.checks.append(name)
        return ok

    def assume(self, cond):
        self.m.d.comb += Assume(cond)

    def counts_by_one(self, name, counter, clear):
        """Check that *counter* holds or counts up by exactly one from each cycle to the
        next unless *clear* (e.g. the reset) was high: so it never wraps (at its ceiling
        it holds), skips or counts down. With ``reset="free"`` and k-induction this is
        proved for every state, the ceiling included, which no simulation reaches."""
        counter = Value.cast(counter)
        prev = self.past(counter, f"{name}_prev")
        cleared = self.past(clear, f"{name}_cleared")
        return self.check(name, (counter == prev) | (counter == prev + 1), guard=~cleared)

    def since(self, cap):
        """Cycles since the reset was last released (0 in the first cycle with ``rst``
        low after a reset cycle), saturating at *cap*: a register of the harness that the
        reset clears."""
        if self._since is None:
            since = Signal(range(cap + 1), name="since_reset")
            with self.m.If(since != cap):
                self.m.d.sync += since.eq(since + 1)
            self._since = since
        return self._since

    def any_const(self, shape, name):
        sig = Signal(shape, name=name)
        self.m.d.comb += sig.eq(AnyConst(Value.cast(sig).shape()))
        return sig

    def any_seq(self, shape, name):
        sig = Signal(shape, name=name)
        self.m.d.comb += sig.eq(AnySeq(Value.cast(sig).shape()))
        return sig

    def past(self, value, name):
        """*value* in the previous cycle (a harness register, arbitrary in the first)."""
        value = Value.cast(value)
        reg = Signal(value.shape(), name=name, reset_less=True)
        self.m.d.sync += reg.eq(value)
        return reg

    def rtlil(self):
        from amaranth.back import rtlil
        return rtlil.convert(self.m, name="top", ports=[self.domain.clk])


def discard(obj, _depth=3):
    """Mark an elaboratable that the harness built but does not elaborate (a block replaced
    by a stub, a reference instance), and the elaboratables it holds, as used: no
    ``UnusedElaboratable`` warning."""
    if isinstance(obj, Elaboratable):
        obj._MustUse__used = True
        if _depth:
            for value in vars(obj).values():
                discard(value, _depth - 1)


def rtl_constant(factory, attribute):
    """``getattr(factory(), attribute)``: a constant the RTL defines on its instances (e.g.
    ``AES256.flush_cycles``), read from a throw-away instance."""
    obj = factory()
    discard(obj)                        # built for its constant only
    return getattr(obj, attribute)


def all_properties():
    """Every property of every block, in report order."""
    import importlib
    props = []
    for block in BLOCKS:
        props += [replace(p, block=block) for p in importlib.import_module(f"formal.{block}").PROPERTIES]
    return props


def select(props, block=None, name=None):
    """Properties whose design or block module is *block* (None: all) and whose name
    contains *name* (None: all); a property selected by name keeps its mutants."""
    out = []
    for p in props:
        if block and block not in (p.design, p.block):
            continue
        if name and name not in p.name.split(".mutant_")[0]:
            continue
        out.append(p)
    return out


__all__ += ["select", "freeze", "rtl_constant", "submodule", "discard"]
