"""``make timing``'s flow (scripts/timing.py) end to end on small circuits: Yosys maps them onto the
OSU 0.18 µm Liberty, OpenSTA reports their paths, the parser and the FO4 measurement read them.
The tools are Debian's (yosys, opensta, qflow-tech-osu018): installed when running as root, else
these tests skip (tb.common.toolchain)."""
import pytest

from scripts import timing
from tb.common.toolchain import require_tool, system_file

REPORT = """Startpoint: _204_ (rising edge-triggered flip-flop clocked by clk)
Endpoint: _202_ (rising edge-triggered flip-flop clocked by clk)
Path Group: clk
Path Type: max

   Delay     Time   Description
-----------------------------------------------------------
   0.000    0.000   clock clk (rise edge)
   0.000    0.000   clock network delay (ideal)
   0.000    0.000 ^ _204_/CLK (DFFPOSX1)
   0.199    0.199 v _204_/Q (DFFPOSX1)
   0.134    0.333 ^ _115_/Y (NAND2X1)
   0.102    0.435 ^ _193_/Y (XNOR2X1)
   0.000    0.435 ^ _202_/D (DFFPOSX1)
            0.435   data arrival time

  10.000   10.000   clock clk (rise edge)
   0.000   10.000   clock network delay (ideal)
   0.000   10.000   clock reconvergence pessimism
           10.000 ^ _202_/CLK (DFFPOSX1)
  -0.184    9.816   library setup time
            9.816   data required time
-----------------------------------------------------------
            9.816   data required time
           -0.435   data arrival time
-----------------------------------------------------------
            9.381   slack (MET)
"""

MAPPED = """  DFFPOSX1 _202_ (
    .CLK(clk),
    .D(_113_),
    .Q(\\s[8] )
  );
  DFFPOSX1 _204_ (
    .CLK(clk),
    .D(a[0]),
    .Q(\\engine.ra[0] )
  );
"""


def test_parse_a_report():
    (path,) = timing.parse_paths(REPORT)
    assert (path["start"], path["end"]) == ("_204_", "_202_")
    assert path["arrival"] == 0.435 and path["setup"] == 0.184 and path["slack"] == 9.381
    assert [p[4] for p in path["points"]] == ["DFFPOSX1", "DFFPOSX1", "NAND2X1", "XNOR2X1", "DFFPOSX1"]
    assert path["points"][-1][1] == path["arrival"]


def test_register_names_follow_the_q_net():
    names = timing.register_names(MAPPED)
    assert names == {"_202_": "s[8]", "_204_": "engine.ra[0]"}
    summary = timing.summarise({"reg_to_reg": timing.parse_paths(REPORT)[0]}, names, fo4_ns=0.1)["reg_to_reg"]
    assert (summary["from"], summary["to"]) == ("engine.ra[0]", "s[8]")
    assert summary["ns"] == pytest.approx(0.619) and summary["fo4"] == pytest.approx(6.2)


@pytest.fixture(scope="module")
def tools():
    purpose = "the static timing flow"
    yosys, sta = require_tool("yosys", purpose), require_tool("sta", purpose)
    if system_file(timing.LIBERTY, timing.LIBERTY_PACKAGE, purpose) is None:
        pytest.skip(f"{timing.LIBERTY} not found (Debian package {timing.LIBERTY_PACKAGE}): {purpose} is not checked")
    return yosys, sta


def _adder(width):
    return (f"module add(input clk, input [{width - 1}:0] a, input [{width - 1}:0] b, output reg [{width}:0] s);\n"
            f"  reg [{width - 1}:0] ra, rb;\n"
            "  always @(posedge clk) begin ra <= a; rb <= b; s <= ra + rb; end\nendmodule\n")


def _analyse(tools, tmp_path, width):
    yosys, sta = tools
    work = tmp_path / f"add{width}"
    work.mkdir()
    (work / "add.v").write_text(_adder(width))
    mapped, cells, area = timing.map_netlist(yosys, work / "add.v", "add", work, delay_ps=20000)
    paths = timing.run_sta(sta, mapped, "add", work)
    return paths, timing.register_names(mapped.read_text()), cells, area


def test_an_adder_end_to_end(tools, tmp_path):
    paths8, names8, cells8, area8 = _analyse(tools, tmp_path, 8)
    paths16, names16, cells16, area16 = _analyse(tools, tmp_path, 16)
    rr = paths16["reg_to_reg"]
    # the carry path runs from an operand register into the sum register
    assert names16[rr["start"]].split("[")[0] in ("ra", "rb"), names16
    assert names16[rr["end"]].startswith("s["), names16
    # the arrival is the sum of the cells' delays on the path, and the slack what is left of 10 ns
    assert sum(p[0] for p in rr["points"]) == pytest.approx(rr["arrival"], abs=0.002)
    assert rr["slack"] == pytest.approx(10 - rr["setup"] - rr["arrival"], abs=0.002)
    # a wider adder has a longer carry chain, more cells and more area
    assert rr["arrival"] > paths8["reg_to_reg"]["arrival"] + 0.2
    assert sum(cells16.values()) > sum(cells8.values()) and area16 > area8
    assert cells16.get(timing.FLIP_FLOP) == 16 + 16 + 17
    # inputs go straight into registers; outputs come straight from them
    assert paths16["in_to_reg"]["arrival"] == 0
    assert 0 < paths16["reg_to_out"]["arrival"] < 0.5


def test_fo4_is_linear_in_the_chain(tools, tmp_path):
    _, sta = tools
    fo4, arrivals = timing.measure_fo4(sta, tmp_path, short=8, long=16)
    assert 0.03 < fo4 < 0.3, f"FO4 of {fo4 * 1000:.0f} ps is not a 0.18 µm inverter's"
    # an independent chain of 24 stages lands where 8 more FO4 stages put it
    fo4_b, arrivals_b = timing.measure_fo4(sta, tmp_path / "b", short=16, long=24)
    assert arrivals_b[16] == pytest.approx(arrivals[16], abs=0.001)
    assert fo4_b == pytest.approx(fo4, rel=0.03)
    # fan-out 4 is slower than fan-out 1 (an unloaded chain), or the loads were not connected
    chain = timing.fo4_chain(4)
    assert chain.count("INVX1") == 4 * 4


def _report(design, netlist, ns):
    path = {"ns": ns, "from": "a[0]", "to": "b[1]"}
    entry = {"reg_to_reg": path, "fo4_per_cycle": round(ns / 0.1, 1), "fmax_mhz_018": round(1000 / ns),
             "fmax_ghz_45nm_scaled": 1.0, "area_um2_018": 2_000_000}
    return {"design": design, "netlist": netlist, "mappings": {"area": entry, "delay": dict(entry)}}


def test_doc_rows_say_current_or_stale():
    rows = timing.docs_table([_report("aes256", "1111", 4.0), _report("sxp", "2222", 5.0)], 0.1,
                             current={"aes256": "1111", "sxp": "3333"})
    aes, sxp = rows[2], rows[3]
    assert aes.startswith("| `aes256` | 4.0 | 40.0 |") and aes.endswith("| `1111` | current |"), aes
    assert sxp.endswith("| `2222` | stale |"), sxp
    assert timing._DOC_ROW.match(aes).groups() == ("aes256", "1111", "current")


def test_doc_keeps_other_designs_rows(tmp_path, monkeypatch):
    doc = tmp_path / "area.md"
    doc.write_text(f"intro\n{timing.DOC_BEGIN}\n{timing.DOC_END}\n")
    monkeypatch.setattr(timing, "generate", lambda name: name)
    monkeypatch.setattr(timing, "netlist_key_digest", lambda path: {"aes256": "1111", "sxp": "9999"}[path])
    monkeypatch.setattr(timing, "_designs", lambda: ["aes256", "sxp"])
    timing.write_doc([_report("sxp", "2222", 5.0)], 0.1, doc)
    timing.write_doc([_report("aes256", "1111", 4.0)], 0.1, doc)
    rows = [line for line in doc.read_text().splitlines() if line.startswith("| `")]
    assert [timing._DOC_ROW.match(r).groups() for r in rows] == [("aes256", "1111", "current"),
                                                                ("sxp", "2222", "stale")], rows
