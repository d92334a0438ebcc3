"""Simulation speed per design: the free-running Verilator model against the regression.

``free_running(design, params)`` builds the design's Verilog (the file
:func:`tb.common.sim.regression_verilog` gives, the one the regression simulates) into a Verilator
C++ model without cocotb or VPI, with the regression's own :data:`tb.common.sim.VERILATOR_FLAGS`
and C++ optimisation (:data:`tb.common.sim.CXX_OPT`, Verilator's ``OPT_FAST``), and a small
generated ``main.cpp`` that holds reset for :data:`RESET_CYCLES` cycles and then only
toggles the clock, two ``eval()`` per cycle, as cocotb's clock does. Every other input
stays 0, or, with ``streams=True``, every ``*__valid`` and ``*__ready`` input of the top
module is held at 1 (sources offering, sinks ready: the stream logic stays busy). The build
is cached in ``sim_build/verilator/<design><params>-free/`` like the regression's.

``driven(design)`` runs one representative cocotb test of the design (:data:`DESIGNS`: the
test that moves the most traffic at full rate) through :func:`tb.common.sim.run`, on the
regression's own cached build, and ``regression(design)`` sums the design's cocotb tests of
the last ``make sim`` (``sim_build/reports/cases/``, else each pytest test's
``results.xml`` in ``sim_build/tests/``). Both are simulated cycles per wall second.
"""
import hashlib
import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field

from scripts.verilog import locked, param_suffix, verilog_body

from .sim import (
    CASES_DIR,
    OBJCACHE,
    SIM_BUILD,
    VERILATOR_FLAGS,
    CaseResult,
    _parse_results,
    make_overrides,
    regression_verilog,
    toolchain_key,
)
from .toolchain import setup_verilator
from .visibility import expose_state

# what a free-running model makes public: nothing; what the regression's models make public
# (registers, memories, ports: tb.common.visibility); every net (cocotb's own --public-flat-rw)
VISIBILITY = ("none", "state", "all")

__all__ = ["Subject", "DESIGNS", "RESET_CYCLES", "stream_inputs", "cpp_name", "main_cpp", "free_build_dir",
           "model_objects", "build_free", "free_running", "build_free_vpi", "free_running_vpi", "driven",
           "cocotb_clock_only", "regression"]

RESET_CYCLES = 8


@dataclass(frozen=True)
class Subject:
    """How one design's speed is measured."""
    test_module: str          # the cocotb module of its regression
    testcase: str             # the representative cocotb test (full variant name)
    cases: tuple              # the regression's pytest tests on this very build (sim_build/tests/<name>)
    params: dict = field(default_factory=dict)


# the representative test: the one that sends the most traffic with no idle and no stall
DESIGNS = {
    "aes256": Subject("tb.aes.test_aes", "random_stream/idle=0.0/stall=0.0", ("test_aes256",)),
    "gcm_core": Subject("tb.gcm.test_gcm", "random_interleaved/idle=0.0/stall=0.0", ("test_gcm_core_gcm_core",)),
    "gcm_core_x4": Subject("tb.gcm.test_gcm", "random_interleaved/idle=0.0/stall=0.0",
                           ("test_gcm_core_gcm_core_x4",)),
    "sxp": Subject("tb.sxp.test_sxp", "random_traffic/idle=0.0/stall=0.0", ("test_sxp_sxp",)),
    "sxp_x4": Subject("tb.sxp.test_sxp", "random_traffic/idle=0.0/stall=0.0", ("test_sxp_sxp_x4",)),
    "pcie_rdtable": Subject("tb.pcie.test_pcie", "random_traffic/idle=0.0/stall=0.0", ("test_pcie_rdtable_256",)),
    "bcu": Subject("tb.gpushield.test_gpushield", "traces_no_false_positive/stalls=0", ("test_bcu", "test_bcu_slots")),
    "cc_ctrl": Subject("tb.cc.test_cc_ctrl", "random_regression/idle=0.0/stall=0.0", ("test_cc_ctrl",)),
    "cc_dma": Subject("tb.cc.test_cc_dma", "random_regression/idle=0.0/stall=0.0", ("test_cc_dma",)),
    "gpu_cc": Subject("tb.cc.test_gpu_cc", "openssl_round_trip/idle=0.0/stall=0.0", ("test_gpu_cc",)),
    "sxp_system": Subject("tb.system.test_system", "secure_boot", ("test_sxp_system_sxp_system",),
                          {"contexts": 4, "entries": 16}),
}

_INPUT = re.compile(r"^\s*input\s+(?:\[[^\]]*\]\s*)?(\\?\S+?)\s*;", re.M)


def _top_module(text, design):
    start = re.search(rf"^module {re.escape(design)}\s*\(", text, re.M)
    if start is None:
        raise ValueError(f"no module {design} in the Verilog")
    end = text.find("\nendmodule", start.end())
    return text[start.end():end]


def stream_inputs(text, design):
    """The inputs of the top module *design* (Verilog *text*) that say "offering" or
    "ready" on a stream: names ending in ``__valid`` (a source) or ``__ready`` (a sink)."""
    return sorted(n for n in _INPUT.findall(_top_module(text, design)) if n.endswith(("__valid", "__ready")))


def cpp_name(port):
    """The C++ member Verilator makes of *port*: each ``_`` that follows a ``_`` is encoded
    as ``__05F`` (``i__valid`` → ``i___05Fvalid``)."""
    out, prev = [], ""
    for ch in port:
        out.append("__05F" if ch == "_" and prev == "_" else ch)
        prev = ch
    return "".join(out)


def main_cpp(design, streams, top=None):
    """The free-running testbench of the model class *top* (``V<design>``): argv[1] = clock
    cycles after reset; prints the cycles and the wall seconds of the clocked loop (steady
    clock)."""
    top = top or f"V{design}"
    held = "".join(f"    top->{cpp_name(p)} = 1;\n" for p in streams)
    return f"""// generated by tb/common/simspeed.py: reset, then the clock only
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include "verilated.h"
#include "{top}.h"

static inline void cycle({top}* top) {{
    top->clk = 1;
    top->eval();
    top->clk = 0;
    top->eval();
}}

int main(int argc, char** argv) {{
    const std::unique_ptr<VerilatedContext> ctx{{new VerilatedContext}};
    const long long cycles = argc > 1 ? std::atoll(argv[1]) : 100000;
    const bool streams = argc > 2 && std::atoi(argv[2]) != 0;
    const std::unique_ptr<{top}> top{{new {top}{{ctx.get()}}}};
    top->clk = 0;
    top->rst = 1;
    top->eval();
    for (int i = 0; i < {RESET_CYCLES}; ++i) cycle(top.get());
    top->rst = 0;
    if (streams) {{
{held}    }}
    const auto start = std::chrono::steady_clock::now();
    for (long long i = 0; i < cycles; ++i) cycle(top.get());
    const std::chrono::duration<double> wall = std::chrono::steady_clock::now() - start;
    top->final();
    std::printf("cycles %lld seconds %.6f\\n", cycles, wall.count());
    return 0;
}}
"""


def free_build_dir(design, params=None, visibility="none"):
    suffix = "" if visibility == "none" else f"-{visibility}"
    return SIM_BUILD / "verilator" / f"{design}{param_suffix(params or {})}-free{suffix}"


def build_free(design, params=None, jobs=None, visibility="none"):
    """Build (cached) the free-running model of *design* with *visibility* (:data:`VISIBILITY`);
    returns (executable, build seconds, 0 when cached)."""
    if visibility not in VISIBILITY:
        raise ValueError(f"visibility must be one of {VISIBILITY}, not {visibility!r}")
    params = dict(params or {})
    setup_verilator()
    hdl = regression_verilog(design, params)
    build_dir = free_build_dir(design, params, visibility)
    with locked(build_dir):
        return _build_free_locked(design, hdl, build_dir, jobs, visibility)


def _build_free_locked(design, hdl, build_dir, jobs, visibility):
    streams = stream_inputs(hdl.read_text(), design)
    main = main_cpp(design, streams)
    make_opt = " ".join(make_overrides())
    flags = VERILATOR_FLAGS + (["--public-flat-rw"] if visibility == "all" else [])
    key = hashlib.sha256(verilog_body(hdl) + " ".join(flags + [toolchain_key(), visibility]).encode()
                         + main.encode()).hexdigest()
    stamp, exe = build_dir / "build.stamp", build_dir / f"V{design}"
    if stamp.exists() and exe.exists() and stamp.read_text() == key:
        return exe, 0.0
    build_dir.mkdir(parents=True, exist_ok=True)
    (build_dir / "main.cpp").write_text(main)
    source = hdl
    if visibility == "state":
        source = build_dir / f"{design}.v"
        source.write_text(expose_state(hdl.read_text())[0])
    jobs = jobs or os.cpu_count() or 1
    cmd = ["verilator", "--cc", "--exe", "--build", "-j", str(jobs), "--top-module", design,
           "-Mdir", str(build_dir), *flags, str(source), str(build_dir / "main.cpp")]
    env = {**os.environ, "MAKEFLAGS": f"{os.environ.get('MAKEFLAGS', '')} {make_opt}".strip()}
    print(f"[simspeed] building {build_dir.name} (no cocotb, no VPI) …", file=sys.stderr, flush=True)
    start = time.monotonic()
    with open(build_dir / "build.log", "w") as log:
        done = subprocess.run(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
    if done.returncode:
        tail = (build_dir / "build.log").read_text()[-3000:]
        raise RuntimeError(f"{design}: free-running build failed ({build_dir / 'build.log'}):\n{tail}")
    seconds = time.monotonic() - start
    stamp.write_text(key)
    print(f"[simspeed] built {build_dir.name} in {seconds:.0f} s", file=sys.stderr, flush=True)
    return exe, seconds


def free_running(design, params=None, cycles=100_000, streams=False, visibility="none"):
    """Free-running speed of *design*: ``{"cycles", "seconds", "cycles_per_second",
    "build_seconds"}`` for *cycles* clock cycles after reset."""
    exe, build_seconds = build_free(design, params, visibility=visibility)
    return {**_run_free(exe, design, cycles, streams), "build_seconds": round(build_seconds, 1)}


def build_free_vpi(design, params=None):
    """The free-running main linked against the regression's own model (its cached cocotb
    build: ``--vpi``, state and ports public, the same objects), without cocotb: separates what the
    model loses to VPI visibility from what the testbench costs. Compiles one file and links;
    returns the executable."""
    from .sim import _build

    params = dict(params or {})
    setup_verilator()
    hdl = regression_verilog(design, params)
    model = _build(design, params, hdl, None)
    out = free_build_dir(design, params) / "vpi"
    with locked(out):
        main = main_cpp(design, stream_inputs(hdl.read_text(), design), top="Vtop")
        exe = out / f"{design}-vpi"
        key = hashlib.sha256((model / "build.stamp").read_bytes() + main.encode()).hexdigest()
        stamp = out / "build.stamp"
        if stamp.exists() and exe.exists() and stamp.read_text() == key:
            return exe
        out.mkdir(parents=True, exist_ok=True)
        (out / "main.cpp").write_text(main)
        # the regression's compile line of its own main (verilator.cpp): same defines and -O
        # (the compiler after the OBJCACHE launcher that runs it, tb/common/objcache.py)
        line = next((ln for ln in (model / "build.log").read_text().splitlines()
                     if " -c -o verilator.o " in ln), None)
        if line is None:
            raise RuntimeError(f"{design}: no compile line of verilator.o in {model / 'build.log'}")
        compiler = line.split(" -c -o verilator.o ")[0].split()
        if compiler[0] == str(OBJCACHE):
            compiler = compiler[1:]
        compile_cmd = compiler + [f"-I{model}", "-c", "-o", str(out / "main.o"), str(out / "main.cpp")]
        objects = [str(model / o) for o in model_objects((model / "Vtop_classes.mk").read_text())]
        for cmd in (compile_cmd, ["c++", str(out / "main.o"), *objects, "-pthread", "-o", str(exe)]):
            subprocess.run(cmd, check=True, cwd=model)
        stamp.write_text(key)
        return exe


def model_objects(classes_mk):
    """What a main links a Verilator model from, given the text of its ``Vtop_classes.mk``:
    the run-time library's objects the model was built with (``VM_GLOBAL_FAST`` and
    ``VM_GLOBAL_SLOW``: ``verilated.o``, ``verilated_vpi.o``, … as its flags asked) and the
    model's own archive ``Vtop__ALL.a``."""
    names, listing = [], False
    for line in classes_mk.splitlines():
        if re.match(r"VM_GLOBAL_(?:FAST|SLOW) \+= \\$", line):
            listing = True
        elif listing and line.startswith("  "):
            names.append(line.strip().rstrip("\\").strip() + ".o")
        else:
            listing = False
    if not names:
        raise ValueError("Vtop_classes.mk lists no run-time objects (VM_GLOBAL_FAST / VM_GLOBAL_SLOW)")
    return names + ["Vtop__ALL.a"]


def free_running_vpi(design, params=None, cycles=100_000, streams=False):
    """:func:`free_running` on the regression's own model (:func:`build_free_vpi`)."""
    return _run_free(build_free_vpi(design, params), design, cycles, streams)


def _run_free(exe, design, cycles, streams):
    out = subprocess.run([str(exe), str(cycles), str(int(streams))], check=True, capture_output=True,
                         text=True).stdout
    m = re.search(r"cycles (\d+) seconds ([\d.]+)", out)
    if m is None:
        raise RuntimeError(f"{design}: unexpected output of {exe}: {out!r}")
    ran, seconds = int(m[1]), float(m[2])
    return {"cycles": ran, "seconds": seconds, "cycles_per_second": ran / seconds if seconds else 0.0}


def _rate(cases):
    cycles, seconds = sum(c.cycles for c in cases), sum(c.seconds for c in cases)
    return {"tests": len(cases), "cycles": cycles, "seconds": round(seconds, 3),
            "cycles_per_second": cycles / seconds if seconds else 0.0}


def driven(design):
    """Driven speed of *design*: its representative cocotb test (:data:`DESIGNS`) run as the
    regression runs it; ``{"test", "tests", "cycles", "seconds", "cycles_per_second",
    "wall_seconds"}`` (seconds: cocotb's wall time of the test; wall_seconds: the whole
    run, build check and simulator start-up included)."""
    subject = DESIGNS[design]
    return _run_cocotb(design, subject.test_module, subject.testcase, "driven")


def cocotb_clock_only(design, cycles=20_000):
    """The cocotb floor: :mod:`tb.common.simspeed_clock` (the testbenches' clock and nothing
    else) on the regression's build of *design*. cocotb's Verilator runner sets
    ``COCOTB_TRUST_INERTIAL_WRITES=1``, so the clock itself toggles in C++ (GPI); what is
    left is one wake-up of Python a cycle (``ClockCycles`` counts edges in Python), the
    least any testbench that acts every cycle pays. Same keys as :func:`driven`."""
    return _run_cocotb(design, "tb.common.simspeed_clock", "clock_only", "clock",
                       {"SIMSPEED_CYCLES": str(cycles)})


def _run_cocotb(design, test_module, testcase, label, extra_env=None):
    from .sim import run

    saved = os.environ.get("PYTEST_CURRENT_TEST")
    os.environ["PYTEST_CURRENT_TEST"] = f"simspeed::simspeed_{design}_{label} (call)"   # its own test dir
    start = time.monotonic()
    try:
        cases = run(design, test_module, params=DESIGNS[design].params, testcase=testcase, extra_env=extra_env)
    finally:
        if saved is None:
            os.environ.pop("PYTEST_CURRENT_TEST", None)
        else:
            os.environ["PYTEST_CURRENT_TEST"] = saved
    return {"test": testcase, **_rate(cases), "wall_seconds": round(time.monotonic() - start, 1)}


def regression(design, cases_dir=CASES_DIR, tests_dir=SIM_BUILD / "tests"):
    """The last regression's speed on *design* (every cocotb test of its pytest tests in
    :data:`DESIGNS`), or None if none of them has results; ``"source"`` says where from."""
    cases, sources = [], set()
    for name in DESIGNS[design].cases:
        summary, xml = cases_dir / f"{name}.json", tests_dir / name / "results.xml"
        if summary.exists():
            cases += [CaseResult(**c) for c in json.loads(summary.read_text())]
            sources.add("cases")
        elif xml.exists():
            cases += _parse_results(xml, name)
            sources.add("results.xml")
    if not cases:
        return None
    return {**_rate(cases), "source": "+".join(sorted(sources))}
