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
from scripts import mutate, mutate_sim


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


def _line(mark, cls=None):
    lines, first = inspect.getsourcelines((cls or TinyLock).elaborate)
    return first + next(i for i, ln in enumerate(lines) if f"MARK:{mark}" in ln)


def _cell(pre_text, module, mark, cls=None):
    """The cell of *module* whose ``src`` is the line tagged *mark* (and its output port)."""
    line = _line(mark, cls)
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
    assert equivalent["how"].startswith("structural") and "runs" not in equivalent     # no property ran
    assert (entry["killed"], entry["survived"], entry["equivalent"], entry["score"]) == (1, 0, 1, 1.0)
    md = mutate.markdown([entry])
    assert "| tiny_lock |" in md and "100 %" in md


class FreeXor(wiring.Component):
    """``o`` = (a | (a & b)) XOR a free value (an abstraction's output): the AND is
    redundant, so a fault that cuts it is equivalent, though not dead."""
    a: In(1)
    b: In(1)
    o: Out(1)

    def elaborate(self, platform):
        from amaranth.asserts import AnySeq

        m = Module()
        both = Signal()
        m.d.comb += both.eq(self.a & self.b)                            # MARK:redundant
        m.d.comb += self.o.eq((self.a | both) ^ AnySeq(1))
        return m


def _free_xor_harness():
    h = formal.Harness()
    dut = h.m.submodules.dut = FreeXor()
    formal.free_inputs(h.m, dut)
    h.check("o_defined", dut.o | ~dut.o)
    return h


def test_free_values_are_shared_by_the_miter(tmp_path):
    """An abstraction's free value (``$anyseq``) is one input of both copies: the redundant
    AND cut is equivalent (left as a cell in each copy, the copies would differ at once)."""
    prop = formal.Property("tiny", "free_xor", _free_xor_harness, depth=2, doc="o defined")
    _text, pre = mutate._harness(prop, {"_dir": tmp_path / "harness"})
    pre_text = pre.read_text()
    cell, _ = _cell(pre_text, "top.dut", "redundant", FreeXor)
    line = f"mutate -mode const0 -module top.dut -cell {cell} -port Y -portbit 0"
    assert mutate.dead_bit(pre_text, "top.dut", line) is None          # not dead: the solver decides
    status, how = mutate.equivalence(pre_text, "top.dut", line, tmp_path / "eq", 120, _solver())
    assert status == "equivalent", how
    flat = (tmp_path / "eq" / "eq.il").read_text()
    assert "$anyseq" not in flat and "\\free_value_0" in flat


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


# ---------------------------------------------------------------- simulation stage
def _tiny_recording(tmp_path):
    """A recorded run of TinyLock (Amaranth's simulator standing in for the Verilator run
    of a passing test): 12 cycles of data, the lock set at cycle 6. Sampled as the replay
    stage samples a test's trace."""
    from amaranth.sim import Simulator

    dut = TinyLock()
    sim = Simulator(dut)
    sim.add_clock(1e-8)

    async def bench(ctx):
        for k in range(12):
            ctx.set(dut.i, (37 * k + 5) & 0xFF)
            ctx.set(dut.lock, k == 6)
            await ctx.tick()

    sim.add_testbench(bench)
    vcd = tmp_path / "recorded.vcd"
    with sim.write_vcd(str(vcd)):
        sim.run()
    widths, changes = mutate_sim.parse_vcd(vcd, "bench.top")
    return {"widths": widths, "cycles": mutate_sim.sample(widths, changes)}


@pytest.mark.skipif(not mutate_sim.can_replay(), reason="no Yosys with `sim` or no vcd2fst on PATH")
def test_replay_kills_output_fault_not_unread_one(tmp_path):
    """The unmutated design replays with no difference; the stuck output-mux select changes
    ``o`` once locked (killed by the replay, at the first locked cycle); the unread
    register's fault reaches no output (not killed)."""
    from amaranth.back import rtlil

    stim = _tiny_recording(tmp_path)
    assert [c["locked"] for c in stim["cycles"]][:9] == [0] * 7 + [1, 1]
    _text, pre = mutate._harness(PROP, {"_dir": tmp_path / "harness"})
    pre_text = pre.read_text()
    bench = mutate_sim.ReplayBench("tiny", rtlil.convert(TinyLock(), name="tiny"), stim, tmp_path / "replay",
                                   mutate.cells_of(pre_text, "top.dut"), mutate.class_span(TARGET.cls))
    assert [n for n, _ in bench.maps] == ["tiny"]
    assert bench.run()["result"] == "same"
    gate, _ = _cell(pre_text, "top.dut", "gate")
    shadow, _ = _cell(pre_text, "top.dut", "shadow")
    killed = bench.run(f"mutate -mode const0 -module top.dut -cell {gate} -port S -portbit 0")
    assert (killed["result"], killed["output"], killed["cycle"]) == ("differs", "o", 7), killed
    unread = bench.run(f"mutate -mode inv -module top.dut -cell {shadow} -port D -portbit 3")
    assert unread["result"] == "same", unread


@pytest.mark.skipif(not mutate_sim.can_replay(), reason="no Yosys with `sim` or no vcd2fst on PATH")
def test_run_target_with_simulation(tmp_path):
    """In the flow: the property kills the stuck select; a fault on the unlocked data path
    (``o`` = ``i`` with a bit inverted: no property looks at unlocked data) survives the
    property and is killed by the replay, named after the recorded test; the unread
    register's fault is shown equivalent structurally before either runs. ``sim=False`` (the
    ``--no-sim`` option) leaves the data-path fault a survivor."""
    from amaranth.back import rtlil

    stim = {**_tiny_recording(tmp_path), "cases": [("tiny_traffic", 12)]}
    cache = {"_dir": tmp_path / "harness"}
    _text, pre = mutate._harness(PROP, cache)
    pre_text = pre.read_text()
    gate, _ = _cell(pre_text, "top.dut", "gate")
    shadow, _ = _cell(pre_text, "top.dut", "shadow")
    mutations = [f"mutate -mode const0 -module top.dut -cell {gate} -port S -portbit 0",
                 f"mutate -mode inv -module top.dut -cell {gate} -port A -portbit 0",
                 f"mutate -mode inv -module top.dut -cell {shadow} -port D -portbit 3"]

    def tiny_bench(target, ref_cells, cls_span, folder, log):
        return mutate_sim.checked_bench("tiny", rtlil.convert(TinyLock(), name="tiny"), stim, folder, ref_cells,
                                        cls_span, {"design": "tiny", "tests": ["tiny_traffic"]})

    quiet = {"log": lambda *a, **k: None, "cache": cache, "mutations": mutations}
    entry = mutate.run_target(TARGET, [PROP], _solver(), work_root=tmp_path / "w1", sim=tiny_bench, **quiet)
    assert not entry["errors"], entry["errors"]
    assert (entry["sim"]["status"], entry["sim"]["baseline"], entry["sim"]["cycles"]) == ("ok", "same", 12)
    by_prop, by_sim, unread = entry["mutants"]
    assert by_prop["killed_by"] == "tiny/locked_reads_zero" and "sim" not in by_prop
    assert (by_sim["status"], by_sim["killed_by"], by_sim["checks"]) == ("killed", "sim:tiny_traffic", ["o"])
    assert by_sim["sim"]["cycle"] == 0 and by_sim["how"].startswith("replay: output o differs")
    # (a register nothing reads is found dead before any check runs: no property, no replay)
    assert unread["status"] == "equivalent" and unread["how"].startswith("structural") and "sim" not in unread
    assert (entry["killed"], entry["killed_by_sim"], entry["survived"], entry["score"]) == (2, 1, 0, 1.0)
    assert "sim:tiny_traffic" in mutate.markdown([entry])

    entry = mutate.run_target(TARGET, [PROP], _solver(), work_root=tmp_path / "w2", sim=False, **quiet)
    assert "sim" not in entry and entry["mutants"][1]["status"] == "survived"
    assert (entry["killed"], entry["killed_by_sim"], entry["survived"]) == (1, 0, 1)


def test_sample_before_edges_and_test_spans(tmp_path):
    """Values are taken just before each rising edge (a change at the edge's own instant is
    the next cycle's); a clock that starts high makes an edge at time 0 whose values before
    it are unknown (None); a cycle of the recording maps to its test."""
    vcd = tmp_path / "t.vcd"
    vcd.write_text("$scope module TOP $end\n $scope module d $end\n  $var wire 1 ! clk $end\n"
                   "  $var wire 4 \" x $end\n $upscope $end\n$upscope $end\n$enddefinitions $end\n"
                   "#0\n$dumpvars\n1!\nb11 \"\n$end\n#5\n0!\n#10\n1!\nb101 \"\n#15\n0!\n#20\n1!\n")
    widths, changes = mutate_sim.parse_vcd(vcd, "TOP.d")
    assert widths == {"clk": 1, "x": 4}
    assert mutate_sim.sample(widths, changes) == [{"clk": None, "x": None}, {"clk": 0, "x": 3},
                                                  {"clk": 0, "x": 5}]
    stim = {"cases": [("a", 3), ("b", 4)]}
    assert [mutate_sim.test_at(stim, c) for c in (0, 2, 3, 6)] == [("a", 0), ("a", 2), ("b", 0), ("b", 3)]


@pytest.mark.skipif(not mutate_sim.can_replay(), reason="no Yosys with `sim` or no vcd2fst on PATH")
def test_replay_baseline_can_fail(tmp_path):
    """A recording the unmutated design does not reproduce (one output value altered) makes
    the target's replay unusable, with the reason; a target with no replay says so."""
    from amaranth.back import rtlil

    stim = _tiny_recording(tmp_path)
    stim["cycles"][9]["o"] ^= 0x10
    _text, pre = mutate._harness(PROP, {"_dir": tmp_path / "harness"})
    bench, info = mutate_sim.checked_bench("tiny", rtlil.convert(TinyLock(), name="tiny"), stim, tmp_path / "r",
                                           mutate.cells_of(pre.read_text(), "top.dut"),
                                           mutate.class_span(TARGET.cls), {})
    assert bench is None and info["baseline"] == "differs", info
    assert info["status"].startswith("no working replay") and "'cycle': 9" in info["status"]
    bench, info = mutate_sim.bench_for(TARGET, [], None, tmp_path / "none")
    assert bench is None and info["status"].startswith("no replay registered")


DEAD_BIT_IL = """module \\top
  wire width 2 input 1 \\a
  wire output 2 \\y
  wire width 2 $n
  cell $not $c
    parameter \\A_SIGNED 0
    parameter \\A_WIDTH 2
    parameter \\Y_WIDTH 2
    connect \\A \\a
    connect \\Y $n
  end
  connect \\y $n [1]
end
"""


def test_dead_bit_is_equivalent_without_a_solver():
    """A fault on bit 0 of a NOT whose output bit 0 nothing reads is equivalent; bit 1
    (driving the output port) is not, nor is a cell that is not bitwise."""
    line = "mutate -mode const1 -module top -cell $c -port A -portbit {}"
    assert mutate.dead_bit(DEAD_BIT_IL, "top", line.format(0)) is not None
    assert mutate.dead_bit(DEAD_BIT_IL, "top", line.format(1)) is None
    assert mutate.dead_bit(DEAD_BIT_IL.replace("cell $not", "cell $add"), "top", line.format(0)) is None


CHAIN_IL = """module \\top
  wire width 2 input 1 \\a
  wire input 2 \\clk
  wire output 3 \\y
  wire width 2 $n1
  wire width 2 $n2
  wire width 2 $sum
  wire width 2 $q
  cell $not $c1
    parameter \\A_SIGNED 0
    parameter \\A_WIDTH 2
    parameter \\Y_WIDTH 2
    connect \\A \\a
    connect \\Y $n1
  end
  cell $and $c2
    parameter \\A_SIGNED 0
    parameter \\B_SIGNED 0
    parameter \\A_WIDTH 2
    parameter \\B_WIDTH 2
    parameter \\Y_WIDTH 2
    connect \\A $n1
    connect \\B \\a
    connect \\Y $n2
  end
  cell $add $c3
    parameter \\A_SIGNED 0
    parameter \\B_SIGNED 0
    parameter \\A_WIDTH 2
    parameter \\B_WIDTH 2
    parameter \\Y_WIDTH 2
    connect \\A \\a
    connect \\B $n2
    connect \\Y $sum
  end
  cell $dff $r
    parameter \\CLK_POLARITY 1
    parameter \\WIDTH 2
    connect \\CLK \\clk
    connect \\D $sum
    connect \\Q $q
  end
  connect \\y { $n2 [1] }
end
"""


def test_dead_bit_follows_the_cone_to_the_outputs():
    """Liveness is transitive: bit 0 of the NOT feeds only bit 0 of the AND, which nothing
    reads but an adder whose register nothing reads (dead two and three cells away); bit 1
    reaches the output. A fault on the adder or the register is dead as a whole; once the
    register drives the output, the adder and bit 0 of the AND (its input) are live."""
    line = "mutate -mode const1 -module top -cell {} -port {} -portbit {}"
    assert mutate.dead_bit(CHAIN_IL, "top", line.format("$c1", "A", 0)) is not None
    assert mutate.dead_bit(CHAIN_IL, "top", line.format("$c1", "Y", 0)) is not None
    assert mutate.dead_bit(CHAIN_IL, "top", line.format("$c1", "A", 1)) is None
    assert mutate.dead_bit(CHAIN_IL, "top", line.format("$c3", "A", 1)) is not None
    assert mutate.dead_bit(CHAIN_IL, "top", line.format("$r", "Q", 0)) is not None
    used = CHAIN_IL.replace("wire output 3 \\y", "wire width 2 output 3 \\y").replace(
        "connect \\y { $n2 [1] }", "connect \\y { $q [0] $n2 [1] }")
    assert mutate.dead_bit(used, "top", line.format("$c3", "A", 1)) is None
    assert mutate.dead_bit(used, "top", line.format("$c1", "A", 0)) is None
    assert mutate.dead_bit(used, "top", line.format("$r", "Q", 1)) is not None     # y takes Q[0] only


def test_merge_rerun_replaces_only_the_rerun_mutants():
    old = {"target": "t", "mutants": [{"id": 0, "mutation": "a", "status": "killed", "killed_by": "p"},
                                      {"id": 1, "mutation": "b", "status": "survived", "killed_by": None}],
           "properties": [], "skipped_properties": [], "errors": ["x"]}
    new = {"mutants": [{"id": 0, "mutation": "b", "status": "killed", "killed_by": "q"}],
           "properties": ["p", "q"], "skipped_properties": [], "errors": []}
    merged = mutate.merge_rerun(old, new)
    got = [(m["id"], m["status"], m["killed_by"]) for m in merged["mutants"]]
    assert got == [(0, "killed", "p"), (1, "killed", "q")]
    assert merged["score"] == 1.0 and merged["errors"] == [] and merged["rerun"] == [1]
    assert old["mutants"][1]["status"] == "survived"        # the old entry is not changed
