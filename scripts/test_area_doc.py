"""The all-designs table that ``make synth`` writes into docs/area.md (scripts/synth.py)."""
import pytest

from scripts import synth
from scripts.synth import AREA_DOC, DOC_BEGIN, DOC_END, doc_reports, docs_table, replace_between

REPORT = {"area_ge": 105165.4, "area_ge_enable_muxes": 116546.0, "area_um2_45nm": 83922.0,
          "flip_flops": 5011, "longest_path_levels": 21, "longest_path_from": "a [1]",
          "longest_path_to": "b [2]", "hash": "0123456789abcdef"}


def test_rows_say_current_stale_or_missing():
    md = docs_table([("aes256", REPORT, True), ("sxp", REPORT, False), ("itx_device", None, False)])
    assert md[0].startswith("| design |") and len(md) == 5
    assert md[2] == ("| `aes256` | 105.2 | 116.5 | 83,922 | 5,011 | 21 | `a [1]` → `b [2]` | "
                     "`0123456789abcdef` | current |")
    assert md[3].endswith("| `0123456789abcdef` | stale: from before a later change of the design |")
    assert md[4] == "| `itx_device` | — | — | — | — | — | — | — | not synthesised |"


def test_doc_rows_read_back():
    """A fresh clone has no cached reports: the table's rows stand in for them."""
    md = docs_table([("aes256", REPORT, True), ("sxp", REPORT, False), ("itx_device", None, False)])
    back = doc_reports("\n".join(md))
    assert set(back) == {"aes256", "sxp"}
    assert back["aes256"]["state"] == "current" and back["sxp"]["state"].startswith("stale"), back
    for key in ("hash", "area_um2_45nm", "flip_flops", "longest_path_levels", "longest_path_from",
                "longest_path_to"):
        assert back["aes256"][key] == REPORT[key], key
    assert back["aes256"]["area_ge"] == pytest.approx(REPORT["area_ge"], abs=50)
    assert docs_table([("aes256", back["aes256"], True)])[2] == md[2]


def test_digest_does_not_depend_on_the_clone(monkeypatch, tmp_path):
    source = tmp_path / "m.v"
    source.write_bytes(b"module m(input a, output b); assign b = a; endmodule\n")
    here = synth._digest(source)
    liberty = tmp_path / "elsewhere" / "scripts" / "synth" / "generic_gates.lib"
    liberty.parent.mkdir(parents=True)
    liberty.write_bytes(synth.LIBERTY.read_bytes())
    monkeypatch.setattr(synth, "ROOT", tmp_path / "elsewhere")
    monkeypatch.setattr(synth, "LIBERTY", liberty)
    assert synth._digest(source) == here
    source.write_bytes(b"module m(input a, output b); assign b = ~a; endmodule\n")
    assert synth._digest(source) != here


def test_replace_between_keeps_the_rest():
    text = "\n".join(["# t", "before", DOC_BEGIN, "old 1", "old 2", DOC_END, "after"])
    new = replace_between(text, ["new"])
    assert new == "\n".join(["# t", "before", DOC_BEGIN, "new", DOC_END, "after"])
    assert replace_between(new, ["new"]) == new


def test_missing_marker_is_an_error():
    with pytest.raises(ValueError, match="markers"):
        replace_between("no markers here", ["x"])


def test_area_doc_has_the_markers():
    text = AREA_DOC.read_text()
    assert text.count(DOC_BEGIN) == 1 and text.count(DOC_END) == 1
    assert text.index(DOC_BEGIN) < text.index(DOC_END)


def test_area_doc_records_every_design():
    """Every design has a row that reads back (a fresh clone's make synth keeps it)."""
    from hw.designs import available
    assert set(doc_reports(AREA_DOC.read_text())) == set(available())
