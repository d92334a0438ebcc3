"""docs/bench.md, which ``make bench`` writes (scripts/bench.py): provenance, staleness and
read-back of every entry."""
import json

import pytest

from scripts.bench import BENCH_DOC, DOC_BEGIN, DOC_END, doc_entries, docs_section, entry_state, stamp, write_bench_doc

PROV = {"design": "gcm_core", "params": {"lanes": 4}, "netlist": "0123456789abcdef"}
FIGURES = {"beats_per_cycle": 1.0, "latency_cycles": 17, "note": "a | b", "per_ctx": [1, 2],
           "nested": {"x": 0.5}, "provenance": PROV}


def digest_of(table):
    return lambda design, params: table[(design, json.dumps(params, sort_keys=True))]


def test_stamp_adds_day_and_command_without_touching_the_figures():
    stamped = stamp(FIGURES, "make bench BLOCK=gcm", day="2026-12-04")
    assert stamped["provenance"] == {**PROV, "measured": "2026-12-04", "command": "make bench BLOCK=gcm"}
    assert FIGURES["provenance"] == PROV                 # the input is not modified
    assert {k: v for k, v in stamped.items() if k != "provenance"} == \
        {k: v for k, v in FIGURES.items() if k != "provenance"}


def test_state_follows_the_netlist():
    entry = stamp(FIGURES, "make bench BLOCK=gcm", day="2026-12-04")
    same = digest_of({("gcm_core", '{"lanes": 4}'): "0123456789abcdef"})
    changed = digest_of({("gcm_core", '{"lanes": 4}'): "fedcba9876543210"})
    assert entry_state(entry, same) == "current"
    assert entry_state(entry, changed) == "stale"
    assert entry_state(stamp({"boot_ms": 1.5}, "make bench BLOCK=ccu"), same) == "host"


def test_section_reads_back_exactly():
    entries = {"gcm_core_x4": stamp(FIGURES, "make bench BLOCK=gcm", day="2026-12-04"),
               "ccu": stamp({"boot_ms": 1.5}, "make bench BLOCK=ccu", day="2026-12-03")}
    md = docs_section(entries, {"gcm_core_x4": "stale", "ccu": "host"})
    text = "\n".join(["x", DOC_BEGIN, *md, DOC_END, ""])
    assert doc_entries(text) == entries
    assert "**stale**" in text and "host software timing" in text


def test_area_keys_stay_in_area_md():
    entry = stamp({"beats_per_cycle": 1.0, "area_kge": 557.1, **{"provenance": PROV}}, "c", day="d")
    md = "\n".join(docs_section({"gcm_core": entry}, {"gcm_core": "current"}))
    assert "beats_per_cycle" in md and "area_kge" not in md


def test_a_run_keeps_the_entries_it_did_not_measure(tmp_path):
    doc = tmp_path / "bench.md"
    doc.write_text("\n".join(["# t", DOC_BEGIN, DOC_END, "tail", ""]))
    digest = digest_of({("gcm_core", '{"lanes": 4}'): "0123456789abcdef",
                        ("sxp", "{}"): "1111111111111111"})
    first = stamp(FIGURES, "make bench BLOCK=gcm", day="2026-12-01")
    write_bench_doc({"gcm_core_x4": first}, doc, digest)
    sxp = stamp({"bytes_per_cycle": 64, "provenance": {"design": "sxp", "params": {},
                                                       "netlist": "1111111111111111"}},
                "make bench BLOCK=sxp", day="2026-12-04")
    merged = write_bench_doc({"sxp": sxp}, doc, digest)
    assert set(merged) == {"gcm_core_x4", "sxp"}
    assert doc_entries(doc.read_text()) == {"gcm_core_x4": first, "sxp": sxp}
    assert doc.read_text().endswith("tail\n")


@pytest.mark.parametrize("module", ["aes", "cc", "ccu", "gcm", "gpushield", "pcie", "sxp", "system"])
def test_every_benchmark_is_on_the_page(module):
    """Each bench module has measured entries on the page (run `make bench BLOCK=<module>`)."""
    commands = {e["provenance"].get("command") for e in doc_entries(BENCH_DOC.read_text()).values()}
    assert f"make bench BLOCK={module}" in commands, \
        f"docs/bench.md has no entry from `make bench BLOCK={module}`: run it"
