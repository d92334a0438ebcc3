"""docs/bench.md, which ``make bench`` writes (scripts/bench.py): provenance, staleness and
read-back of every entry."""
import json

import pytest

from scripts import bench

PROV = {"design": "gcm_core", "params": {"lanes": 4}, "netlist": "0123456789abcdef"}
FIGURES = {"beats_per_cycle": 1.0, "latency_cycles": 17, "note": "a | b", "per_ctx": [1, 2],
           "nested": {"x": 0.5}, "provenance": PROV}


def digest_of(table):
    return lambda design, params: table[(design, json.dumps(params, sort_keys=True))]


def test_stamp_adds_day_and_command_without_touching_the_figures():
    stamped = bench.stamp(FIGURES, "make bench BLOCK=gcm", day="2026-12-04")
    assert stamped["provenance"] == {**PROV, "measured": "2026-12-04", "command": "make bench BLOCK=gcm"}
    assert FIGURES["provenance"] == PROV                 # the input is not modified
    assert {k: v for k, v in stamped.items() if k != "provenance"} == \
        {k: v for k, v in FIGURES.items() if k != "provenance"}


def test_state_follows_the_netlist():
    entry = bench.stamp(FIGURES, "make bench BLOCK=gcm", day="2026-12-04")
    same = digest_of({("gcm_core", '{"lanes": 4}'): "0123456789abcdef"})
    changed = digest_of({("gcm_core", '{"lanes": 4}'): "fedcba9876543210"})
    assert bench.entry_state(entry, same) == "current"
    assert bench.entry_state(entry, changed) == "stale"
    assert bench.entry_state(bench.stamp({"boot_ms": 1.5}, "make bench BLOCK=ccu"), same) == "host"


def test_section_reads_back_exactly():
    entries = {"gcm_core_x4": bench.stamp(FIGURES, "make bench BLOCK=gcm", day="2026-12-04"),
               "ccu": bench.stamp({"boot_ms": 1.5}, "make bench BLOCK=ccu", day="2026-12-03")}
    md = bench.docs_section(entries, {"gcm_core_x4": "stale", "ccu": "host"})
    text = "\n".join(["x", bench.DOC_BEGIN, *md, bench.DOC_END, ""])
    assert bench.doc_entries(text) == entries
    assert bench.doc_states(text) == {"gcm_core_x4": "stale", "ccu": "host"}
    assert "**stale**" in text and "host software timing" in text


def test_area_keys_stay_in_area_md():
    entry = bench.stamp({"beats_per_cycle": 1.0, "area_kge": 557.1, **{"provenance": PROV}}, "c", day="d")
    md = "\n".join(bench.docs_section({"gcm_core": entry}, {"gcm_core": "current"}))
    assert "beats_per_cycle" in md and "area_kge" not in md


def test_a_run_keeps_the_entries_it_did_not_measure(tmp_path):
    doc = tmp_path / "bench.md"
    doc.write_text("\n".join(["# t", bench.DOC_BEGIN, bench.DOC_END, "tail", ""]))
    digest = digest_of({("gcm_core", '{"lanes": 4}'): "0123456789abcdef",
                        ("sxp", "{}"): "1111111111111111"})
    first = bench.stamp(FIGURES, "make bench BLOCK=gcm", day="2026-12-01")
    bench.write_bench_doc({"gcm_core_x4": first}, doc, digest)
    sxp = bench.stamp({"bytes_per_cycle": 64, "provenance": {"design": "sxp", "params": {},
                                                       "netlist": "1111111111111111"}},
                "make bench BLOCK=sxp", day="2026-12-04")
    merged, _ = bench.write_bench_doc({"sxp": sxp}, doc, digest)
    assert set(merged) == {"gcm_core_x4", "sxp"}
    assert bench.doc_entries(doc.read_text()) == {"gcm_core_x4": first, "sxp": sxp}
    assert doc.read_text().endswith("tail\n")


@pytest.mark.parametrize("module", ["aes", "cc", "ccu", "gcm", "gpushield", "pcie", "sxp", "system"])
def test_every_benchmark_is_on_the_page(module):
    """Each bench module has measured entries on the page (run `make bench BLOCK=<module>`)."""
    commands = {e["provenance"].get("command") for e in bench.doc_entries(bench.BENCH_DOC.read_text()).values()}
    assert f"make bench BLOCK={module}" in commands, \
        f"docs/bench.md has no entry from `make bench BLOCK={module}`: run it"


def test_headlines_render_figures_and_flag_stale_or_missing(monkeypatch):
    entries = {"ccu": {"boot_ms": 6.5, "provenance": {}}}
    monkeypatch.setattr(bench, "HEADLINES", (
        ("CCU", "boot {ccu[boot_ms]:.1f} ms", "make bench BLOCK=ccu"),
        ("SXP", "{sxp_x4[bytes]} B", "make bench BLOCK=sxp"),
        ("CC", "{ccu[ratio]}", "make bench BLOCK=cc")))
    md = bench.headline_table(entries, {"ccu": "stale"})
    assert md[2] == "| CCU | boot 6.5 ms (**stale**: the design changed since) | `make bench BLOCK=ccu` |"
    assert md[3] == "| SXP | not measured yet (sxp_x4) | `make bench BLOCK=sxp` |"
    assert md[4] == "| CC | not measured yet (ratio missing) | `make bench BLOCK=cc` |"


def test_readme_quotes_the_latest_measurements():
    """The bench.README's headline table is what docs/bench.md's entries render to: run `make bench`
    (or a block's) after changing a template or the page."""
    text = bench.BENCH_DOC.read_text()
    lines = bench.README.read_text().split("\n")
    table = lines[lines.index(bench.README_BEGIN) + 1:lines.index(bench.README_END)]
    assert table == bench.headline_table(bench.doc_entries(text), bench.doc_states(text))
    assert len(bench.HEADLINES) >= 8, "a headline per benchmarked block"


def test_line_rate_table_is_what_bench_and_area_render():
    """docs/line-rate.md's table is what docs/bench.md and docs/area.md render to (make bench
    and make synth rewrite it; a hand edit or a stale copy fails here)."""
    lines = bench.LINE_RATE_DOC.read_text().split("\n")
    table = lines[lines.index(bench.LINE_RATE_BEGIN) + 1:lines.index(bench.LINE_RATE_END)]
    assert table == bench.documented_line_rate_table()


def test_line_rate_rows_divide_area_by_all_blocks_per_cycle():
    entries = {"sxp_x4": {"both_1024_write_bytes_per_cycle": 64.0}}
    report = {"area_ge": 1_280_000.0, "area_ge_enable_muxes": 1_440_000.0, "longest_path_levels": 23,
              "longest_path_from": "a", "longest_path_to": "b"}
    md = bench.line_rate_table(entries, {"sxp_x4": "stale"}, {"sxp_x4": (report, True)})
    row = next(line for line in md if line.startswith("| `sxp_x4` |"))
    assert row == "| `sxp_x4` | 4 | 64.0 (stale) | 2 | 1,280.0 / 1,440.0 | 160.0 | 23 | `a` → `b` |"
    assert any("| `gcm_core_x2` | 2 | not benchmarked" in line and "not synthesised" in line for line in md)
