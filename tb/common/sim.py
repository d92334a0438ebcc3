"""Build (cached) and run cocotb tests on Verilator from pytest.

``run(design, test_module)`` converts the design to Verilog, builds a Verilator model once
per design, parameter set and flags (``sim_build/verilator/<design><params>/``; rebuilt only
when the Verilog or the flags change), runs the cocotb tests of *test_module* in
``sim_build/tests/<pytest test>/`` and turns the cocotb results into a pytest verdict that
names the failing test, its message and the seed that reproduces it.

Environment: ``SEED`` fixes the random seed; ``WAVES=1`` writes a trace to
``sim_build/waves/<pytest test>.fst`` (``.vcd`` without lz4, renamed for GTKWave:
:func:`tb.common.toolchain.gtkwave_safe_vcd`) from a build with tracing
compiled in (``sim_build/verilator/<design><params>-waves/``; the regression's builds leave
tracing out, which halves their C++ compile time); ``TESTCASE`` runs only the
named cocotb test(s) (comma separated). ``SIM_COVERAGE=1`` (``make coverage``; not
``COVERAGE``, which cocotb reads as a request for Python code coverage) builds with
Verilator's line and toggle coverage, in build directories of their own
(``…-cov/``: the regression's builds never pay for it), and writes each pytest test's
``coverage.dat`` and functional bins (``functional.json``, :mod:`tb.common.cover`) to
``sim_build/coverage/<tb folder>/<pytest test>/`` for ``scripts/coverage.py``.
``SIM_SBOX=circuit`` builds every design with the AES S-box circuit instead of the table
model (:func:`regression_sbox`).
"""
import ast
import hashlib
import json
import os
import random
import re
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

from scripts.verilog import ROOT, generate, locked, param_suffix, releases, verilog_body

from .toolchain import gtkwave_safe_vcd, setup_verilator, wave_format
from .visibility import VISIBILITY_FLAGS, expose_state

__all__ = ["run", "params", "make_overrides", "toolchain_key", "regression_sbox",
           "regression_verilog", "CIRCUIT_DESIGNS", "CaseResult", "RESULTS", "SIM_BUILD",
           "CLOCK_PERIOD_NS", "CASES_DIR", "COVERAGE_DIR", "coverage_enabled"]

SIM_BUILD = ROOT / "sim_build"
CLOCK_PERIOD_NS = 10  # every testbench clocks at 100 MHz, so simulated cycles = sim ns / 10

# Verilator warnings that Amaranth's generated Verilog triggers by design (width
# extensions and unused bits) are not errors in our RTL.
# --output-split-cfuncs: Verilator writes the per-cycle code as functions of at most 2,000
# statements; GCC's time grows faster than the size of a function, and the models run as fast
# or faster (free-running, same machine: sxp_x4 built in 177 s -> 88 s with OPT_FAST -Og below,
# 12.7 k -> 13.0 k cycles/s; gcm_core_x4 69 s -> 38 s, 28.9 k -> 30.7 k cycles/s).
VERILATOR_FLAGS = ["-Wno-fatal", "-Wno-WIDTHEXPAND", "-Wno-WIDTHTRUNC", "-Wno-UNUSEDSIGNAL",
                   "-Wno-UNOPTFLAT", "-O3", "--x-assign", "fast", "--x-initial", "fast",
                   "--output-split-cfuncs", "2000"]
# The C++ optimisation of the model's per-cycle code (Verilator's OPT_FAST, after its own
# -O3). The regression is bound by compiling the big designs (sxp_x4: 42 MB of C++), not by
# running them: -O1 compiles in half the time of Verilator's default -Os (measured on a
# 2.2 MB file of sxp_x4: 7.8 s against 15.5 s), and -Og, with the functions split as above,
# in half the time of -O1 again, with no loss of speed (figures above). SIM_CXX_OPT=-Os
# restores the default. The run-once code (OPT_SLOW) stays unoptimised: at -O1 its
# symbol-table constructor alone compiles for tens of minutes.
CXX_OPT = os.environ.get("SIM_CXX_OPT", "-Og")
# Verilator's run-time library is compiled once per clone, not once per model
# (tb/common/objcache.py, Verilator's OBJCACHE hook).
OBJCACHE = Path(__file__).resolve().with_name("objcache.py")


def make_overrides():
    """The variables every Verilator model's ``make`` is run with (through ``MAKEFLAGS``)."""
    return [f"OPT_FAST={CXX_OPT}", f"OBJCACHE={OBJCACHE}"]


def toolchain_key():
    """What a model build depends on besides its Verilog and Verilator flags, as its cache
    key sees it: the ``make`` variables (the object-cache launcher's path relative to the
    clone: where the clone lies does not change the model), the Verilator and cocotb
    releases, and the directory of cocotb's libraries, which the model links by its
    RUNPATH (a build made against another virtual environment is not reused)."""
    import cocotb_tools.config

    overrides = " ".join(make_overrides()).replace(f"{ROOT}{os.sep}", "")
    return f"{overrides} {releases('verilator', 'cocotb')} libs={cocotb_tools.config.libs_dir}"


# `SIM_COVERAGE=1` builds: line (statement and branch) and toggle coverage. Toggle coverage skips
# signals wider than --coverage-max-width (256 by default); the widest data paths are the
# 512-bit beats at lanes 4 and the packed stream payloads around them, so every bit of them
# is counted.
COVERAGE_FLAGS = ["--coverage-line", "--coverage-toggle", "--coverage-max-width", "4096"]
COVERAGE_DIR = SIM_BUILD / "coverage"   # <tb folder>/<pytest test>/{coverage.dat,functional.json}


@dataclass
class CaseResult:
    test: str        # cocotb test name, qualified by the pytest test that ran it
    passed: bool
    cycles: int      # simulated clock cycles
    seconds: float   # wall time of the cocotb test
    message: str = ""
    session: str = ""   # the pytest session that ran it ($SIM_SESSION, set by tb/conftest.py)


RESULTS: list[CaseResult] = []  # every cocotb test run in this pytest process (for the summary)
# ... and one JSON file per pytest test here, so that the summary of a parallel run (pytest-xdist
# workers are separate processes) can collect them all
CASES_DIR = SIM_BUILD / "reports" / "cases"


def coverage_enabled():
    """Whether this run collects coverage (``SIM_COVERAGE=1``, set by ``make coverage``)."""
    return os.environ.get("SIM_COVERAGE", "0") not in ("", "0")


# The designs whose regression simulates the S-box circuit itself: aes256's tests (CAVP, FIPS
# and 13,000 random blocks against OpenSSL) are where the circuit is verified in Verilator.
CIRCUIT_DESIGNS = frozenset({"aes256"})


def regression_sbox(design):
    """The S-box model (:func:`hw.aes.sbox.sbox_model`) *design* is simulated with: the
    table, cheaper to build and faster to run for every design around an AES pipeline
    (the figures: docs/developing.md, "Simulation speed"), except for
    :data:`CIRCUIT_DESIGNS`, coverage builds (their line and toggle figures are of the
    circuit) and ``SIM_SBOX=circuit``. The table is evaluated from the circuit
    (:data:`hw.aes.sbox.TABLE`), so the two models agree cycle for cycle; make verilog, make
    synth and make formal always see the circuit."""
    from hw.aes.sbox import check_model

    try:
        chosen = check_model(os.environ.get("SIM_SBOX", "table"))
    except ValueError as error:
        raise ValueError(f"SIM_SBOX: {error}") from None
    if design in CIRCUIT_DESIGNS or coverage_enabled():
        return "circuit"
    return chosen


def regression_verilog(design, params):
    """The Verilog file a regression of *design* with *params* builds (converted, cached):
    :func:`scripts.verilog.generate` with the S-box model of :func:`regression_sbox`."""
    return generate(design, params, sbox=regression_sbox(design))


def _build(design, params, hdl_path, trace, coverage=False):
    # a build with tracing compiled in is twice as costly to compile (measured on gcm_core:
    # 55 s against 28 s of C++), so only `WAVES=1` runs get one, in a directory of its own;
    # coverage builds (slower to compile and to run) likewise
    suffix = ("-cov" if coverage else "") + ("-waves" if trace else "")
    build_dir = SIM_BUILD / "verilator" / f"{design}{param_suffix(params)}{suffix}"
    with locked(build_dir):
        return _build_locked(design, params, hdl_path, trace, build_dir, coverage)


def _build_locked(design, params, hdl_path, trace, build_dir, coverage=False):
    from cocotb_tools.runner import get_runner

    # The regression's models compile the Verilog with only its state and ports public
    # (tb.common.visibility), a copy with the same lines. Coverage builds compile the
    # generated file itself with every net public, so that coverage.dat names that file.
    flags = (VERILATOR_FLAGS + ([] if coverage else VISIBILITY_FLAGS)
             + ([f"--trace-{trace}", "--trace-structs"] if trace else [])
             + (COVERAGE_FLAGS if coverage else []))
    make_opt = " ".join(make_overrides())
    body = verilog_body(hdl_path)
    if not coverage:
        body = expose_state(body.decode())[0].encode()
    key = hashlib.sha256(body + " ".join(flags + [toolchain_key()]).encode()).hexdigest()
    stamp = build_dir / "build.stamp"
    exe = build_dir / design
    if stamp.exists() and exe.exists() and stamp.read_text() == key:
        return build_dir
    runner = get_runner("verilator")
    log = build_dir / "build.log"
    build_dir.mkdir(parents=True, exist_ok=True)
    source = hdl_path
    if not coverage:
        source = build_dir / f"{design}.v"
        source.write_text(expose_state(hdl_path.read_text())[0])
    start = time.monotonic()
    print(f"\n[sim] building {design}{param_suffix(params)} with Verilator (cached afterwards) …",
          file=sys.stderr, flush=True)
    makeflags = os.environ.get("MAKEFLAGS", "")
    os.environ["MAKEFLAGS"] = f"{makeflags} {make_opt}".strip()   # the runner's make reads it
    try:
        runner.build(sources=[source], hdl_toplevel=design, build_dir=build_dir,
                     build_args=flags, waves=bool(trace), always=True, log_file=log)
    finally:
        os.environ["MAKEFLAGS"] = makeflags
    stamp.write_text(key)
    print(f"[sim] built {design} in {time.monotonic() - start:.0f} s", file=sys.stderr, flush=True)
    return build_dir


def _test_name():
    current = os.environ.get("PYTEST_CURRENT_TEST", "manual")
    name = current.split("::")[-1].split(" ")[0]
    return re.sub(r"[^\w.-]+", "_", name).strip("_")


def _parse_results(xml_path, prefix):
    cases = []
    root = ET.parse(xml_path).getroot()
    for case in root.iter("testcase"):
        failure = case.find("failure")
        if failure is None:
            failure = case.find("error")
        message = ""
        if failure is not None:
            message = failure.get("message") or (failure.text or "").strip()
        props = {p.get("name"): p.get("value") for p in case.iter("property")}
        sim_ns = float(props.get("sim_time_duration", case.get("sim_time_ns", 0)) or 0)
        assert props.get("sim_time_unit", "ns") == "ns", props.get("sim_time_unit")
        cases.append(CaseResult(f"{prefix}::{case.get('name')}", failure is None,
                                round(sim_ns / CLOCK_PERIOD_NS), float(case.get("time", 0) or 0),
                                message))
    return cases


def params(design=None):
    """The parameters of the design under test, for a cocotb module: those of the
    registered design (:data:`hw.designs.DESIGNS`, e.g. ``lanes=4`` of ``sxp_x4``) updated
    with the ones its pytest entry built it with (``SIM_PARAMS``, set by :func:`run`).
    *design* defaults to the simulation's toplevel; outside a simulation the result holds
    ``SIM_PARAMS`` only (usually empty)."""
    from hw.designs import DESIGNS

    design = design or os.environ.get("COCOTB_TOPLEVEL")
    base = dict(DESIGNS[design].params) if design in DESIGNS else {}
    return {**base, **ast.literal_eval(os.environ.get("SIM_PARAMS") or "{}")}


def _defines_any(test_module, testcase):
    """Whether the cocotb module *test_module* defines a test named by *testcase* (a name
    or a comma-separated list), so that ``TESTCASE=`` runs only the designs that have it
    instead of building every design to run nothing."""
    source = (ROOT / Path(*test_module.split("."))).with_suffix(".py").read_text()
    bases = [n.split("/")[0] for n in _testcase_names(testcase)]
    return any(re.search(rf"^async def {re.escape(n)}\(", source, re.M) for n in bases)


def _testcase_names(testcase):
    return [t.strip() for t in str(testcase).split(",") if t.strip()]


def _test_filter(testcase):
    """cocotb's test filter for *testcase*: each name selects that test and, for a test
    swept with ``cocotb.parametrize``, every variant of it (``name/idle=…/stall=…``); a
    full variant name selects that variant only."""
    names = "|".join(re.escape(n) for n in _testcase_names(testcase))
    return rf"\.({names})(/.*)?$"


def run(design, test_module, params=None, testcase=None, extra_env=None):
    """Run the cocotb tests of *test_module* against *design* (a contract name in
    ``hw.designs``) built with *params*. Fails the calling pytest test if any fails."""
    import pytest

    testcase = testcase or os.environ.get("TESTCASE") or None
    if testcase and not _defines_any(test_module, testcase):
        pytest.skip(f"{test_module} defines none of the tests {testcase!r} (TESTCASE)")
    setup_verilator()
    params = dict(params or {})
    waves = os.environ.get("WAVES", "0") not in ("", "0")
    trace = wave_format() if waves else None    # FST may need a package installed: only when asked
    hdl = regression_verilog(design, params)
    coverage = coverage_enabled()
    build_dir = _build(design, params, hdl, trace if waves else None, coverage)

    name = _test_name()
    test_dir = SIM_BUILD / "tests" / name
    test_dir.mkdir(parents=True, exist_ok=True)
    seed = int(os.environ["SEED"]) if os.environ.get("SEED") else random.randrange(1 << 31)
    wave_file = Path(os.environ.get("WAVE_FILE") or SIM_BUILD / "waves" / f"{name}.{trace}")
    test_args = []
    if waves:
        wave_file.parent.mkdir(parents=True, exist_ok=True)
        test_args = ["--trace", "--trace-file", str(wave_file)]
    env = {"PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
           "SIM_PARAMS": repr(params), **(extra_env or {})}
    plusargs = []
    if coverage:
        cov_dir = COVERAGE_DIR / test_module.split(".")[1] / name
        cov_dir.mkdir(parents=True, exist_ok=True)
        for stale in ("coverage.dat", "functional.json"):
            (cov_dir / stale).unlink(missing_ok=True)
        plusargs = [f"+verilator+coverage+file+{cov_dir / 'coverage.dat'}"]
        env["FCOV_FILE"] = str(cov_dir / "functional.json")     # tb.common.cover writes it at exit
    results_xml = test_dir / "results.xml"

    from cocotb_tools.runner import get_runner

    runner = get_runner("verilator")
    log_file = test_dir / "sim.log"
    try:
        runner.test(test_module=test_module, hdl_toplevel=design, hdl_toplevel_lang="verilog",
                    build_dir=build_dir, test_dir=test_dir, seed=seed,
                    test_filter=_test_filter(testcase) if testcase else None,
                    test_args=test_args, plusargs=plusargs, extra_env=env, results_xml=str(results_xml),
                    log_file=log_file, waves=False)
    except SystemExit:
        pass  # cocotb's runner exits on failure; the results file says what failed
    except subprocess.CalledProcessError:
        pass
    if waves:
        if trace == "vcd" and wave_file.exists():
            gtkwave_safe_vcd(wave_file)
        print(f"\n[sim] waves: {wave_file}", file=sys.stderr)
    if not results_xml.exists():
        tail = log_file.read_text()[-3000:] if log_file.exists() else ""
        pytest.fail(f"{design}: simulation produced no results (seed {seed}); log {log_file}:\n{tail}")
    cases = _parse_results(results_xml, name)
    for case in cases:
        case.session = os.environ.get("SIM_SESSION", "")
    RESULTS.extend(cases)
    CASES_DIR.mkdir(parents=True, exist_ok=True)
    (CASES_DIR / f"{name}.json").write_text(json.dumps([c.__dict__ for c in cases]))
    if not cases:
        pytest.fail(f"{design}: no cocotb test ran from {test_module} (filter {testcase!r})")
    failed = [c for c in cases if not c.passed]
    if failed:
        lines = [f"{c.test}: {c.message}" for c in failed]
        pytest.fail(f"{len(failed)} of {len(cases)} cocotb tests failed (seed {seed}; reproduce with "
                    f"SEED={seed}; log {log_file}):\n" + "\n".join(lines), pytrace=False)
    return cases
