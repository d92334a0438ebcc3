"""scripts/mutate.py end to end on a tiny design: a lock whose output reads zero once
locked. A mutant on the output gate is killed by the lock property; a mutant on a register
nothing reads survives the property and is shown equivalent; the score leaves it out."""
import inspect
import os

import pytest
from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

import formal
from scripts import formal as runner
from scripts import mutate


class TinyLock(wiring.Component):
    """``lock`` sets ``locked`` until reset; ``o`` is ``i`` while unlocked, 0 when locked.
    ``shadow`` copies ``i`` and is read by nothing (a mutant of it changes no output)."""
    lock: In(1)
    i: In(8)
    o: Out(8)
    locked: Out(1)

    def elaborate(self, platform):
        m = Module()
        shadow = Signal(8)                                              # MARK:shadow (its $dff)
        m.d.sync += shadow.eq(self.i)
        with m.If(self.lock):
            m.d.sync += self.locked.eq(1)
        m.d.comb += self.o.eq(Mux(self.locked, 0, self.i))              # MARK:gate
        return m


def _build():
    h = formal.Harness()
    dut = h.m.submodules.dut = TinyLock()
    formal.free_inputs(h.m, dut)
    h.check("locked_reads_zero", dut.o == 0, guard=dut.locked)
    return h


PROP = formal.Property("tiny", "locked_reads_zero", _build, depth=3, doc="locked: o reads 0")
TARGET = mutate.Target("tiny_lock", f"{__name__}.TinyLock", ("tiny",), doc="test design")


def _line(mark):
    lines, first = inspect.getsourcelines(TinyLock.elaborate)
    return first + next(i for i, ln in enumerate(lines) if f"MARK:{mark}" in ln)


def _cell(pre_text, module, mark):
    """The cell of *module* whose ``src`` is the line tagged *mark* (and its output port)."""
    line = _line(mark)
    for name, key, srcs in mutate.cells_of(pre_text, module):
        if any(n == line for _, n in srcs):
            return name, key[0]
    raise AssertionError(f"no cell at line {line}")


def test_target_rejects_bad_parameters():
    with pytest.raises(ValueError):
        mutate.Target("Bad Name", "x.Y", ("tiny",), doc="")
    with pytest.raises(TypeError):
        mutate.Target("ok", "x.Y", "tiny", doc="")
    with pytest.raises(ValueError):
        mutate.Target("ok", "x.Y", ("tiny",), doc="", count=0)


def test_split_and_substitute():
    text = ('attribute \\top 1\nmodule \\top\n  cell \\top.a \\a\n  end\nend\n'
            'attribute \\src "x.py:3"\nmodule \\top.a\nend\n')
    spans = mutate.split_modules(text)
    assert list(spans) == ["top", "top.a"]
    assert text[slice(*spans["top.a"])].startswith('attribute \\src "x.py:3"\nmodule \\top.a')
    assert mutate.module_src(text[slice(*spans["top.a"])]) == ("x.py", 3)
    new = mutate.substitute(text, {"top.a": "module \\top.a\n  wire \\w\nend\n"})
    assert new.endswith("module \\top.a\n  wire \\w\nend\n") and new.startswith("attribute \\top 1\nmodule \\top\n")


def _solver():
    solver, path_dir = runner.find_solver()
    return solver, dict(os.environ, PATH=f"{path_dir}{os.pathsep}{os.environ.get('PATH', '')}")


def test_killed_and_equivalent(tmp_path):
    cache = {"_dir": tmp_path / "harness"}
    _text, pre = mutate._harness(PROP, cache)
    pre_text = pre.read_text()
    module = "top.dut"
    gate, gate_type = _cell(pre_text, module, "gate")
    shadow, shadow_type = _cell(pre_text, module, "shadow")
    assert gate_type == "$mux" and shadow_type == "$dff", (gate_type, shadow_type)
    mutations = [
        # the output mux's select stuck at 0: o = i even when locked (a dropped lock check)
        f"mutate -mode const0 -module {module} -cell {gate} -port S -portbit 0",
        # the unread register's D inverted: nothing observable changes
        f"mutate -mode inv -module {module} -cell {shadow} -port D -portbit 3",
    ]
    entry = mutate.run_target(TARGET, [PROP], _solver(), mutations=mutations, work_root=tmp_path,
                              cache=cache, log=lambda *a, **k: None)
    assert not entry["errors"], entry["errors"]
    assert [p["baseline"] for p in entry["properties"]] == ["pass"]
    killed, equivalent = entry["mutants"]
    assert killed["status"] == "killed" and killed["killed_by"] == "tiny/locked_reads_zero"
    assert killed["checks"] == ["locked_reads_zero"]
    assert equivalent["status"] == "equivalent", equivalent["how"]
    assert (entry["killed"], entry["survived"], entry["equivalent"], entry["score"]) == (1, 0, 1, 1.0)
    md = mutate.markdown([entry])
    assert "| tiny_lock |" in md and "100 %" in md


def test_survivor_that_differs_is_not_called_equivalent(tmp_path):
    """The equivalence check can fail: the output mux mutant is not equivalent."""
    cache = {"_dir": tmp_path / "harness"}
    _text, pre = mutate._harness(PROP, cache)
    pre_text = pre.read_text()
    gate, _ = _cell(pre_text, "top.dut", "gate")
    status, how = mutate.equivalence(pre_text, "top.dut",
                                     f"mutate -mode const0 -module top.dut -cell {gate} -port S -portbit 0",
                                     tmp_path / "eq", 120, _solver())
    assert status == "survived" and how.startswith("differs"), how
