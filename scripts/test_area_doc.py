"""The all-designs table that ``make synth`` writes into docs/area.md (scripts/synth.py)."""
import pytest

from scripts.synth import AREA_DOC, DOC_BEGIN, DOC_END, docs_table, replace_between

REPORT = {"area_ge": 105165.4, "area_ge_enable_muxes": 116546.0, "area_um2_45nm": 83922.0,
          "flip_flops": 5011, "longest_path_levels": 21, "longest_path_from": "a [1]",
          "longest_path_to": "b [2]"}


def test_rows_say_current_stale_or_missing():
    md = docs_table([("aes256", REPORT, True), ("sxp", REPORT, False), ("itx_device", None, False)])
    assert md[0].startswith("| design |") and len(md) == 5
    assert md[2] == ("| `aes256` | 105.2 | 116.5 | 83,922 | 5,011 | 21 | `a [1]` → `b [2]` | current |")
    assert md[3].endswith("| stale: from before a later change of the design |")
    assert md[4] == "| `itx_device` | — | — | — | — | — | — | not synthesised |"


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
