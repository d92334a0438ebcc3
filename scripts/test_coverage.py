"""Unit tests of the coverage merge and summary (scripts/coverage.py) and of the functional cover
groups (tb/common/cover.py), on small hand-written Verilator coverage files whose figures are
worked out by hand below. No simulator runs."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

from scripts import coverage as cov
from scripts.verilog import ROOT
from tb.common import cover
from tb.common.toolchain import system_tool

# a 7-line "generated Verilog" file: line 2 is Yosys's dump_module artifact
VERILOG = textwrap.dedent("""\
    module top(input clk, output a);
      if (\\$auto$verilog_backend.cc:2355:dump_module$127 ) begin end
      x = 1;
      if (rst) y = 0;
      else y = 1;
      z = (* src = "/nowhere/hw/top.py:12" *) 2;
    endmodule
    """)
ARTIFACT_TOGGLE = "__024auto__024verilog_backend__02ecc__03a2355__03adump_module__024127"


def _key(path, line, kind, name, page=None, hier="top"):
    page = page or f"v_{kind}/top"
    return f"\x01f\x02{path}\x01l\x02{line}\x01t\x02{kind}\x01page\x02{page}\x01o\x02{name}\x01h\x02{hier}"


def _dat(points):
    return cov.DAT_HEADER + "\n" + "".join(f"C '{k}' {n}\n" for k, n in points) + "\n"


@pytest.fixture
def source(tmp_path):
    path = tmp_path / "top.v"
    path.write_text(VERILOG)
    return str(path)


def _test_a(src):
    """Test A: line 3 hit 5 times; line 4's `if` branch never taken, its `else` twice; line 6
    never run; a[0] rose once and never fell; b rose and fell 3 times each; the artifact's
    `if` (line 2) and toggles never hit."""
    return [(_key(src, 3, "line", "block"), 5),
            (_key(src, 4, "branch", "if"), 0), (_key(src, 4, "branch", "else"), 2),
            (_key(src, 6, "line", "block"), 0),
            (_key(src, 1, "toggle", "a[0]:0->1"), 1), (_key(src, 1, "toggle", "a[0]:1->0"), 0),
            (_key(src, 1, "toggle", "b:0->1"), 3), (_key(src, 1, "toggle", "b:1->0"), 3),
            (_key(src, 2, "branch", "if"), 0), (_key(src, 2, "branch", "else"), 9),
            (_key(src, 1, "toggle", f"{ARTIFACT_TOGGLE}:0->1"), 0),
            (_key(src, 1, "toggle", f"{ARTIFACT_TOGGLE}:1->0"), 0)]


def _test_b(src):
    """Test B: runs line 6 once and makes a[0] fall."""
    return [(_key(src, 6, "line", "block"), 1), (_key(src, 1, "toggle", "a[0]:1->0"), 1)]


def test_parse_adds_repeated_points_and_rejects_other_files(source):
    counts = cov.parse_dat(_dat([(_key(source, 3, "line", "block"), 2), (_key(source, 3, "line", "block"), 3)]))
    assert counts == {_key(source, 3, "line", "block"): 5}
    with pytest.raises(ValueError, match="not a Verilator coverage file"):
        cov.parse_dat("C 'x' 1\n", "bad.dat")
    with pytest.raises(ValueError, match=r"bad\.dat:2: not a coverage point"):
        cov.parse_dat(cov.DAT_HEADER + "\nC 'x' many\n", "bad.dat")


def test_summary_of_one_test(source):
    s = cov.summarize(cov.parse_dat(_dat(_test_a(source))))["top"]
    # lines 3, 4, 6 have points (line 2's artifact `if` is excluded; its `else` alone would
    # still count line 2, hit 9 times): lines 2, 3 covered; 4 (missed `if`) and 6 not
    assert (s.lines, s.lines_hit) == (4, 2)
    assert s.line_pct == pytest.approx(50.0)
    assert [u["line"] for u in s.uncovered] == [4, 6]
    assert s.uncovered[0]["points"] == ["if"] and s.uncovered[0]["text"] == "if (rst) y = 0;"
    # the Amaranth line that made an uncovered statement, from Yosys's src attribute
    assert s.uncovered[1]["amaranth"] == "/nowhere/hw/top.py:12" and s.uncovered[0]["amaranth"] == ""
    # toggles: a[0] 0->1 hit, a[0] 1->0 not, b both: 3 of 4; the artifact's two apart
    assert (s.toggles, s.toggles_hit, s.untoggled) == (4, 3, [["a", 1]])
    assert s.toggle_pct == pytest.approx(75.0)
    assert s.excluded == 3          # the artifact's `if` and its two toggle points


def test_merge_of_two_tests_sums_point_by_point(source):
    a, b = cov.parse_dat(_dat(_test_a(source))), cov.parse_dat(_dat(_test_b(source)))
    merged = cov.merge(a, b)
    assert merged[_key(source, 6, "line", "block")] == 1
    assert merged[_key(source, 3, "line", "block")] == 5
    assert merged[_key(source, 1, "toggle", "a[0]:1->0")] == 1
    s = cov.summarize(merged)["top"]
    assert (s.lines, s.lines_hit, [u["line"] for u in s.uncovered]) == (4, 3, [4])
    assert s.line_pct == pytest.approx(75.0)
    assert (s.toggles, s.toggles_hit) == (4, 4)


def test_signal_names_of_toggle_points():
    assert cov.signal_name("__024147[3]:0->1") == "$147"
    assert cov.signal_name("req_o___05Fpayload.data[9]:1->0") == "req_o__payload.data"
    assert cov.signal_name("mem[2][7]:0->1") == "mem"


def test_data_path_roles():
    role = cov.data_path_role
    assert role("aes256", "s3_state") == role("bcu", "engine.id_key[3]") == "data"
    assert role("gcm_core", "i__payload$12.block") == role("sxp", "engine_r.gcm.key__payload.key") == "data"
    assert role("sxp", "engine_r.gcm.ctx0_nonce") == "embedded"        # gcm_core's regression's
    assert role("sxp_x4", "engine_w.gcm.s2_state") == "embedded"
    assert role("sxp_system-contexts_4-entries_16", "sxp.engine_r.gcm.aes.i__payload.block") == "embedded"
    assert role("sxp_system-contexts_4-entries_16", "sxp.xb_i__payload.data") == "data"   # a port of sxp
    assert role("pcie_rdtable-entries_32", "req_o__payload.data") == "constant"
    assert role("sxp_system-contexts_4-entries_16", "rdtable.req_o__payload.data") == "constant"
    assert role("sxp", "engine_r.gcm.ctx0_nonce_count") is None        # not a data-path name
    assert role("bcu", "engine.mem_req__payload.addr") == role("bcu", "engine.q3.entry.size") == "data"
    assert role("sxp", "parking.slot0_hdr.addr") is role("sxp", "parking.slot0_hdr.tag") is None
    assert role("bcu", "checker.limit_p3") is role("bcu", "front.pair0.lane_lo") is None


def test_data_path_check(tmp_path):
    """A system design: its own port bit never fell (a miss), one inside an embedded block's
    internals never rose (that block's regression's), a constant field and an address never
    moved (not counted)."""
    src = str(tmp_path / "sxp_system-contexts_4.v")
    (tmp_path / "sxp_system-contexts_4.v").write_text("module sxp_system;\nendmodule\n")

    def key(hier, name):
        return _key(src, 1, "toggle", name, hier=hier)

    points = [(key("sxp_system.sxp", "xb_i___05Fpayload__02edata[1]:0->1"), 2),
              (key("sxp_system.sxp", "xb_i___05Fpayload__02edata[1]:1->0"), 0),
              (key("sxp_system.sxp", "xb_i___05Fpayload__02edata[0]:0->1"), 1),
              (key("sxp_system.sxp", "xb_i___05Fpayload__02edata[0]:1->0"), 1),
              (key("sxp_system.sxp.engine_r.gcm", "ctx0_key[7]:0->1"), 0),
              (key("sxp_system.sxp.engine_r.gcm", "ctx0_key[7]:1->0"), 3),
              (key("sxp_system", "req_o___05Fpayload__02edata[5]:0->1"), 0),
              (key("sxp_system", "addr[40]:0->1"), 0)]
    d = cov.summarize(cov.parse_dat(_dat(points)))["sxp_system-contexts_4"]
    assert (d.data_path, d.data_path_hit) == (4, 3)
    assert (d.data_path_embedded, d.data_path_embedded_hit, d.data_path_constant) == (2, 1, 1)
    assert d.data_path_untoggled == [["sxp.xb_i__payload.data", 1]]
    assert d.data_path_pct == pytest.approx(75.0)
    assert cov.check_data_path({"x": d}) == [
        "sxp_system-contexts_4: data-path signal 'sxp.xb_i__payload.data': 1 toggle points never hit"]
    d.data_path_untoggled = []
    assert cov.check_data_path({"x": d}) == []


def test_unreachable_bits_are_not_misses(tmp_path):
    """bcu's RBT fetch address bits 3..0 are UNREACHABLE (16-byte entries): never hit, they
    count apart; bit 4 of the same signal is a miss."""
    src = str(tmp_path / "bcu.v")
    (tmp_path / "bcu.v").write_text("module bcu;\nendmodule\n")

    points = [(_key(src, 1, "toggle", f"mem_req___05Fpayload__02eaddr[{b}]:{e}", hier="bcu.engine"), 0)
              for b in (3, 4) for e in ("0->1", "1->0")]
    d = cov.summarize(cov.parse_dat(_dat(points)))["bcu"]
    assert (d.data_path, d.data_path_hit, d.data_path_constant) == (2, 0, 2)
    assert d.data_path_untoggled == [["engine.mem_req__payload.addr", 2]]


def test_merged_dat_round_trips(source, tmp_path):
    merged = cov.merge(cov.parse_dat(_dat(_test_a(source))), cov.parse_dat(_dat(_test_b(source))))
    cov.write_dat(tmp_path / "m.dat", merged)
    assert cov.read_dat(tmp_path / "m.dat") == merged


def test_lcov_info_figures(source, tmp_path):
    cov.write_info(cov.merge(cov.parse_dat(_dat(_test_a(source))), cov.parse_dat(_dat(_test_b(source)))),
                   tmp_path / "c.info")
    lines = (tmp_path / "c.info").read_text().splitlines()
    assert f"SF:{source}" in lines
    # a line's count is the least of its points': line 4's `if` was never taken
    assert [x for x in lines if x.startswith("DA:")] == ["DA:2,9", "DA:3,5", "DA:4,0", "DA:6,1"]
    assert "LF:4" in lines and "LH:3" in lines
    # branches: line 2's `else` (its `if` excluded), line 4's `else` (2) and `if` (never)
    assert [x for x in lines if x.startswith("BRDA:")] == ["BRDA:2,0,0,9", "BRDA:4,0,0,2", "BRDA:4,0,1,-"]
    assert "BRF:3" in lines and "BRH:2" in lines


def test_functional_merge_and_missed_bins():
    a = {"g.p": {"kind": "point", "items": ["p"], "bins": {"x": 1, "y": 0, "z": 0}}}
    b = {"g.p": {"kind": "point", "items": ["p"], "bins": {"x": 2, "y": 1, "z": 0}},
         "h.c": {"kind": "cross", "items": ["p", "q"], "bins": {"1 × 2": 0}}}
    merged = cov.merge_functional(a, b)
    assert merged["g.p"]["bins"] == {"x": 3, "y": 1, "z": 0}
    summary = cov.functional_summary(merged)
    assert (summary["bins"], summary["hit"]) == (4, 2)
    assert summary["pct"] == pytest.approx(50.0)
    assert cov.check_functional(summary) == ["g.p: bin 'z' never hit", "h.c: bin '1 × 2' never hit"]
    clash = {"g.p": {"kind": "cross", "items": ["p", "q"], "bins": {}}}
    with pytest.raises(ValueError, match="g.p is declared as point"):
        cov.merge_functional(a, clash)


def test_report_from_a_coverage_folder(source, tmp_path):
    data, reports = tmp_path / "coverage", tmp_path / "reports"
    for block, test, points in (("blk", "test_a", _test_a(source)), ("blk", "test_b", _test_b(source))):
        (data / block / test).mkdir(parents=True)
        (data / block / test / "coverage.dat").write_text(_dat(points))
    (data / "blk" / "test_a" / "functional.json").write_text(json.dumps(
        {"g.p": {"kind": "point", "items": ["p"], "bins": {"x": 1, "y": 0}}}))
    html = system_tool("genhtml", "the coverage report's HTML view") is not None
    designs, fsum = cov.report(data, reports, html=html)
    assert designs["top"].blocks == ["blk"] and designs["top"].line_pct == pytest.approx(75.0)
    saved = json.loads((reports / "coverage.json").read_text())
    assert saved["tests"] == {"blk": ["test_a", "test_b"]}
    assert saved["designs"]["top"]["line_pct"] == 75.0 and saved["designs"]["top"]["toggle_pct"] == 100.0
    assert "| `top` | blk | 2 | 75.00 | 3 / 4 | 1 | 100.00 | 4 / 4 | 3 |" in (reports / "coverage.md").read_text()
    assert (fsum["bins"], fsum["hit"]) == (2, 1)
    assert "`y`" in (reports / "functional.md").read_text()
    if html:
        assert (reports / "coverage-html" / "index.html").exists(), "genhtml wrote no HTML view"


# ---- tb/common/cover.py ----------------------------------------------------------------------

@pytest.fixture
def collecting(monkeypatch):
    monkeypatch.setattr(cover, "ENABLED", True)


def test_cover_group_counts_points_and_crosses(collecting):
    g = cover.Covergroup("unit_a", {"op": ["rd", "wr"], "size": [1, 2, 4]}, {"op_x_size": ("op", "size")},
                         ignore={"op_x_size": [("rd", 4)]})
    g.sample(op="rd", size=1)
    g.sample(op="wr", size=4)
    g.sample(op="rd", size=1)
    snap = {k: v for k, v in cover.snapshot().items() if k.startswith("unit_a.")}
    assert snap["unit_a.op"]["bins"] == {"rd": 2, "wr": 1}
    assert snap["unit_a.size"]["bins"] == {"1": 2, "2": 0, "4": 1}
    # 2 × 3 combinations less the ignored (rd, 4)
    assert snap["unit_a.op_x_size"]["bins"] == {"rd × 1": 2, "rd × 2": 0, "wr × 1": 0, "wr × 2": 0, "wr × 4": 1}
    assert snap["unit_a.op_x_size"]["kind"] == "cross" and snap["unit_a.op_x_size"]["items"] == ["op", "size"]


def test_cover_group_refuses_what_it_cannot_count(collecting):
    g = cover.Covergroup("unit_b", {"op": ["rd", "wr"]})
    with pytest.raises(ValueError, match=r"unit_b.op: sampled 'x', which is not one of its bins"):
        g.sample(op="x")
    with pytest.raises(TypeError, match=r"missing points \['op'\]"):
        g.sample()
    with pytest.raises(ValueError, match="declared twice"):
        cover.Covergroup("unit_b", {"op": ["rd"]})
    with pytest.raises(ValueError, match="not a bin of op"):
        cover.Covergroup("unit_c", {"op": ["rd"], "n": [1]}, {"c": ("op", "n")}, ignore={"c": [("wr", None)]})
    with pytest.raises(ValueError, match="unknown"):
        cover.Covergroup("unit_d", {"op": ["rd"]}, {"c": ("op", "size")})
    with pytest.raises(TypeError, match="non-empty list"):
        cover.Covergroup("unit_e", {"op": []})


def test_sampling_is_off_unless_collecting(monkeypatch):
    monkeypatch.setattr(cover, "ENABLED", False)
    g = cover.Covergroup("unit_off", {"op": ["rd"]})
    g.sample(op="rd")
    assert cover.snapshot()["unit_off.op"]["bins"] == {"rd": 0}, "a sample counted without FCOV_FILE"


def test_cover_file_is_written_when_the_process_exits(tmp_path):
    """FCOV_FILE: what a simulator process leaves for `make coverage` (written at exit)."""
    target = tmp_path / "f.json"
    code = ("from tb.common.cover import Covergroup\n"
            "g = Covergroup('unit_exit', {'p': [0, 1]})\n"
            "g.sample(p=1); g.sample(p=1)\n")
    env = {**os.environ, "FCOV_FILE": str(target), "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "-c", code], env=env, check=True, cwd=ROOT, timeout=60)
    assert json.loads(target.read_text()) == {"unit_exit.p": {"kind": "point", "items": ["p"],
                                                              "bins": {"0": 0, "1": 2}}}
