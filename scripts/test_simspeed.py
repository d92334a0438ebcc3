"""tb/common/simspeed.py (``make bench BLOCK=simspeed``): the port scan, the generated
free-running main, the regression read-back, and one real build of the smallest design."""
import json

import pytest

from tb.common import sim, simspeed
from tb.common.bench_simspeed import table

HEADER = """module top_a(clk, rst, i__valid, o__ready);
  input clk;
  input [255:0] i__payload;
  input i__valid;
  input o__ready;
  output o__valid;
  input rst;
endmodule
module dut(clk, rst, x__valid, y__ready, y__valid, z__ready_n);
  input clk;
  input x__valid;
  wire x__valid;
  input y__ready;
  output y__valid;
  input [1:0] z__ready_n;
  input rst;
endmodule
"""


def test_stream_inputs_are_the_top_modules_valid_and_ready_inputs():
    assert simspeed.stream_inputs(HEADER, "dut") == ["x__valid", "y__ready"]
    assert simspeed.stream_inputs(HEADER, "top_a") == ["i__valid", "o__ready"]


CLASSES_MK = """# Global classes, need linked once per executable, fast-path
VM_GLOBAL_FAST += \\
  verilated \\
  verilated_vpi \\

# Global classes, need linked once per executable, non-fast-path
VM_GLOBAL_SLOW += \\
  verilated_cov \\

VM_SUPPORT_FAST += \\
  Vtop__Dpi \\
"""


def test_model_objects_come_from_the_models_makefile():
    assert simspeed.model_objects(CLASSES_MK) == ["verilated.o", "verilated_vpi.o", "verilated_cov.o",
                                                  "Vtop__ALL.a"]
    with pytest.raises(ValueError, match="no run-time objects"):
        simspeed.model_objects("VM_SUPPORT_FAST += \\\n  Vtop__Dpi \\\n")


def test_cpp_name_encodes_double_underscores_as_verilator_does():
    assert simspeed.cpp_name("i__valid") == "i___05Fvalid"
    assert simspeed.cpp_name("pcie_o__ready") == "pcie_o___05Fready"
    assert simspeed.cpp_name("clk") == "clk"


def test_main_holds_the_streams_only_when_asked():
    main = simspeed.main_cpp("dut", ["x__valid", "y__ready"])
    assert '#include "Vdut.h"' in main
    assert "top->x___05Fvalid = 1;" in main and "top->y___05Fready = 1;" in main
    assert main.index("if (streams)") < main.index("x___05Fvalid")
    assert f"i < {simspeed.RESET_CYCLES}" in main


def test_every_design_is_registered_and_has_its_representative_test():
    from hw.designs import DESIGNS

    assert set(simspeed.DESIGNS) <= set(DESIGNS)
    for design, subject in simspeed.DESIGNS.items():
        assert sim._defines_any(subject.test_module, subject.testcase), (design, subject.testcase)


def test_regression_prefers_the_cases_summary(tmp_path):
    cases, tests = tmp_path / "cases", tmp_path / "tests"
    cases.mkdir()
    (cases / "test_bcu.json").write_text(json.dumps([
        {"test": "test_bcu::a", "passed": True, "cycles": 3000, "seconds": 1.0, "message": ""},
        {"test": "test_bcu::b", "passed": True, "cycles": 1000, "seconds": 1.0, "message": ""}]))
    result = simspeed.regression("bcu", cases, tests)
    assert result["cycles"] == 4000 and result["cycles_per_second"] == 2000 and result["source"] == "cases"
    assert simspeed.regression("aes256", cases, tests) is None


def test_table_rows():
    row = {"free_cycles_per_s": 2_000_000, "free_streams_cycles_per_s": 1_000_000,
           "free_vpi_model_cycles_per_s": 100_000, "cocotb_clock_only_cycles_per_s": 20_000,
           "driven_cycles_per_s": 4000,
           "free_over_driven": 500.0, "driven_test": "t", "regression_cycles_per_s": None}
    (line,) = table({"aes256": row})[2:]
    assert line.startswith("| `aes256` | 2,000,000 | 1,000,000 | 100,000 | 20,000 | 4,000 (`t`) | 500.0 | not known |")


def test_free_running_smallest_design():
    """One real build (cached in sim_build/verilator/cc_ctrl-free/), with the regression's flags."""
    result = simspeed.free_running("cc_ctrl", cycles=1000)
    assert result["cycles"] == 1000 and result["cycles_per_second"] > 0
    build = simspeed.free_build_dir("cc_ctrl")
    log = (build / "build.log").read_text() if (build / "build.log").exists() else ""
    assert not log or f" {sim.CXX_OPT} " in log, "the model's C++ is not built at the regression's OPT_FAST"
    streams = simspeed.free_running("cc_ctrl", cycles=1000, streams=True)
    assert streams["cycles"] == 1000 and streams["build_seconds"] == 0     # the same build, cached


def test_main_links_against_the_regression_model():
    """The same main on the regression's own cc_ctrl build (compiled here and linked only)."""
    result = simspeed.free_running_vpi("cc_ctrl", cycles=1000, streams=True)
    assert result["cycles"] == 1000 and result["cycles_per_second"] > 0


def test_visibility_is_checked_and_kept_apart():
    with pytest.raises(ValueError, match="visibility"):
        simspeed.build_free("cc_ctrl", visibility="wires")
    dirs = {simspeed.free_build_dir("cc_ctrl", visibility=v) for v in simspeed.VISIBILITY}
    assert len(dirs) == len(simspeed.VISIBILITY), "each visibility needs a build of its own"
