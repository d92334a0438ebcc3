"""Unit tests of the shared tooling: payload packing, the CAVP reader, the synthesis
report parser, design selection."""

import pytest
from amaranth.lib import data
from amaranth.lib import enum as aenum

from hw.designs import by_folder
from scripts.synth import _parse_stat, clock_gate
from sw.cavp import parse_rsp
from tb.common.payload import pack, unpack


class Colour(aenum.Enum, shape=2):
    RED = 0
    BLUE = 2


LAYOUT = data.StructLayout({"a": 4, "colour": Colour, "b": 8})


def test_pack_places_first_field_lowest():
    assert pack(LAYOUT, a=0x5) == 0x5
    assert pack(LAYOUT, colour=Colour.BLUE) == 2 << 4
    assert pack(LAYOUT, b=0xAB) == 0xAB << 6


def test_unpack_round_trip_and_enum():
    value = pack(LAYOUT, a=9, colour=Colour.BLUE, b=200)
    assert unpack(LAYOUT, value) == {"a": 9, "colour": Colour.BLUE, "b": 200}
    assert unpack(LAYOUT, 1 << 4)["colour"] == 1  # not a member: the raw value


@pytest.mark.parametrize("fields, error", [({"a": 16}, ValueError), ({"zz": 1}, KeyError),
                                           ({"b": -1}, ValueError)])
def test_pack_rejects(fields, error):
    with pytest.raises(error):
        pack(LAYOUT, **fields)


def test_cavp_reader_sections_and_fail():
    text = """# comment
[Keylen = 256]
[IVlen = 96]

Count = 0
Key = 00ff
FAIL

Count = 1
Key = 11

[DECRYPT]

COUNT = 7
KEY = 22
"""
    records = list(parse_rsp(text))
    assert [r["COUNT"] for r in records] == ["0", "1", "7"]
    assert records[0]["FAIL"] is True and "FAIL" not in records[1]
    assert records[0]["section"] == {"Keylen": "256", "IVlen": "96"}
    assert records[2]["section"] == {"DECRYPT": True}


def test_stat_parser():
    text = """
=== aes256 ===
   Number of cells:                 12
     AND2                            3
     DFF                             2
     XOR2                            7

   Chip area for module '\\aes256': 29.333000
"""
    cells, area = _parse_stat(text)
    assert cells["AND2"] == 3 and cells["DFF"] == 2 and cells["XOR2"] == 7
    assert area == pytest.approx(29.333)


def _netlist(enables):
    """A JSON netlist with one DFFE per entry of *enables*: (cell type, enable bit)."""
    cells = {f"ff{i}": {"type": kind, "connections": {"C": [2], "E": [e], "D": [100 + i], "Q": [200 + i]}}
             for i, (kind, e) in enumerate(enables)}
    cells["and"] = {"type": "$_AND_", "connections": {"A": [3], "B": [4], "Y": [5]}}
    return {"modules": {"top": {"cells": cells, "netnames": {"n": {"bits": list(range(2, 300))}}}}}


def test_clock_gate_groups_by_enable():
    # 8 flip-flops on enable 3 are gated (one ICG); 2 on enable 4 keep their enable (too few);
    # 8 active-low ones on enable 5 get an ICG behind an inverter
    netlist = _netlist([("$_DFFE_PP_", 3)] * 8 + [("$_DFFE_PP_", 4)] * 2 + [("$_DFFE_PN_", 5)] * 8)
    icgs, gated = clock_gate(netlist, min_bits=8)
    cells = netlist["modules"]["top"]["cells"]
    assert (icgs, gated) == (2, 16)
    kinds = sorted(c["type"] for c in cells.values())
    assert kinds.count("ICG") == 2 and kinds.count("$_NOT_") == 1
    assert kinds.count("$_DFF_P_") == 16 and kinds.count("$_DFFE_PP_") == 2
    icg = {c["connections"]["E"][0]: c["connections"]["GCK"] for c in cells.values() if c["type"] == "ICG"}
    assert icg[3] == cells["ff0"]["connections"]["C"]
    inv = next(c for c in cells.values() if c["type"] == "$_NOT_")
    assert inv["connections"]["A"] == [5] and cells["ff10"]["connections"]["C"] == icg[inv["connections"]["Y"][0]]
    assert cells["ff0"]["connections"]["D"] == [100] and cells["ff0"]["connections"]["Q"] == [200]
    # fresh nets do not collide with existing ones
    assert all(b[0] >= 300 for b in icg.values())


def test_design_selection():
    assert by_folder("aes256") == ["aes256"]
    assert by_folder("aes") == ["aes256"]
    with pytest.raises(ValueError):
        by_folder("nonesuch")


def test_longest_path_names_its_ends():
    from scripts.synth import longest_path
    text = """Longest topological path in t (length=3):
    0: \\r [6]
    1: $abc$750$new_n95_ (via $abc$1)
    2: $abc$750$new_n103_ (via $abc$2)
    3: $auto$maccmap.cc:240:synth$121.Y [7] (via $abc$3)
   ff: \\q [7] (via $auto$ff.cc:266:slice$132)
"""
    assert longest_path(text) == (3, "r [6]", "q [7]")
    # a path that ends on an output port has no ff: line
    assert longest_path(text.split("   ff:")[0]) == (3, "r [6]", "$auto$maccmap.cc:240:synth$121.Y [7]")


def test_constant_only_processes_are_refused():
    import pytest

    from scripts.verilog import check_processes
    check_processes("  always @*\n    x = y;\n")          # a real process
    with pytest.raises(ValueError, match="slot_beat"):
        check_processes("  always @*\n    slot_beat[211] = 1'h1;\n")


def test_block_test_paths(tmp_path):
    from scripts.blocks import test_paths
    assert test_paths() == ["tb"]
    assert test_paths("aes") == ["tb/aes"] and test_paths("aes256") == ["tb/aes"]
    assert test_paths("ccu") == ["sw/ccu"]          # software only: its tests live in sw/
    with pytest.raises(ValueError, match="no tests for BLOCK='nosuch'"):
        test_paths("nosuch")
    # a block folder with a bench but no test file is refused, not run empty
    (tmp_path / "tb" / "lonely").mkdir(parents=True)
    (tmp_path / "tb" / "lonely" / "bench_lonely.py").write_text("")
    (tmp_path / "sw").mkdir()
    with pytest.raises(ValueError, match="lonely"):
        test_paths("lonely", root=tmp_path)


def test_bcu_area_like_for_like():
    from tb.gpushield.bench_gpushield import _dff_ge, area_like_for_like
    assert _dff_ge() == pytest.approx(5.667)
    # 8,000 bits in flip-flops of 5 GE (1 µm² per GE here) inside a 100,000 µm² unit
    a = area_like_for_like(8000, 100_000.0, 5.0, um2_per_ge=1.0, sram_um2_per_bit=0.5)
    assert a["units_per_gpu"] == round(14.2 * 1024 / 1000)
    assert a["unit_storage_flip_flops_mm2"] == 0.04
    assert a["unit_mm2_sram_estimate"] == pytest.approx(0.06 + 0.004)
    assert a["gpu_mm2_flip_flops"] == pytest.approx(a["units_per_gpu"] * 0.1, abs=1e-3)
    with pytest.raises(ValueError):
        area_like_for_like(0, 1.0, 5.0)


# Run in a fresh interpreter: it imports Amaranth only, then elaborates each design in a
# child of its own (fork), and prints the hw modules each child had loaded.
_LOADED_BY_ELABORATION = r"""
import json, sys
from multiprocessing import get_context
from amaranth.hdl import Fragment

def loaded(name):
    from hw.designs import elaborate
    Fragment.get(elaborate(name), None)
    return name, sorted(m.__file__ for n, m in sys.modules.items()
                        if (n == "hw" or n.startswith("hw.")) and getattr(m, "__file__", None))

if __name__ == "__main__":
    with get_context("fork").Pool(2, maxtasksperchild=1) as pool:
        print(json.dumps(dict(pool.map(loaded, sys.argv[1:], chunksize=1))))
"""


def test_design_sources_cover_what_elaboration_loads():
    # A conversion is cached on design_sources: a module it misses would leave a stale
    # Verilog file after an edit. Every design, elaborated alone, loads only files listed.
    import json
    import subprocess
    import sys
    from pathlib import Path

    from hw.designs import DESIGNS
    from scripts.verilog import ROOT, design_sources

    out = subprocess.run([sys.executable, "-c", _LOADED_BY_ELABORATION, *DESIGNS], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    for name, files in json.loads(out).items():
        loaded = {Path(f).resolve() for f in files}
        listed = set(design_sources(name))
        assert loaded <= listed, f"{name}: loads {sorted(map(str, loaded - listed))}, not in its sources"
        assert ROOT / "hw" / "designs.py" in listed
    # a block's sources are its own and what it imports: another block's edit leaves it be
    aes = {p.relative_to(ROOT).as_posix() for p in design_sources("aes256")}
    assert aes == {"hw/__init__.py", "hw/designs.py", "hw/aes/__init__.py", "hw/aes/core.py",
                   "hw/aes/layout.py", "hw/aes/sbox.py"}
    assert ROOT / "hw" / "gpushield" / "checker.py" in design_sources("bcu")
    assert not any("gpushield" in p.as_posix() for p in design_sources("sxp"))
    with pytest.raises(ValueError, match="unknown design"):
        design_sources("nonesuch")


def test_imported_modules_resolves_every_import_form(tmp_path):
    from scripts.verilog import _imported_modules
    path = tmp_path / "engine.py"
    path.write_text("import hw.aes.core as core\n"
                    "from . import layout\n"
                    "from ..common import arith, util\n"
                    "from .regs import REGS\n"
                    "def elaborate():\n"
                    "    from hw.csr import bus\n")
    assert set(_imported_modules(path, "hw.sxp.engine")) == {
        "hw.aes.core", "hw.sxp", "hw.sxp.layout", "hw.common", "hw.common.arith",
        "hw.common.util", "hw.sxp.regs", "hw.sxp.regs.REGS", "hw.csr", "hw.csr.bus"}
    package = tmp_path / "__init__.py"          # in a package's __init__, "." is the package
    package.write_text("from .core import AES256\n")
    assert set(_imported_modules(package, "hw.aes")) == {"hw.aes.core", "hw.aes.core.AES256"}


def test_conversion_stamp_follows_the_converter(monkeypatch):
    # a pinned Amaranth (or its Yosys) upgraded in pyproject.toml converts every design again
    import importlib.metadata

    from scripts.verilog import CONVERTERS, _source_hash

    here = _source_hash("aes256", {})
    assert _source_hash("aes256", {}) == here
    assert _source_hash("aes256", {"lanes": 4}) != here
    real = importlib.metadata.version
    for package in CONVERTERS:
        monkeypatch.setattr(importlib.metadata, "version",
                            lambda name, p=package: "0.0" if name == p else real(name))
        assert _source_hash("aes256", {}) != here, f"a conversion by another {package} release is reused"
