"""The register tables in docs/, generated from the register maps of the designs.

``python -m scripts.gen_docs [BLOCK ...]`` rewrites every generated part of docs/ (or only
those of the named blocks or designs, as in ``make sim BLOCK=``) and writes the JSON form of
some maps to ``sim_build/reports/``; ``python -m scripts.gen_docs --check`` writes nothing
and exits 1 naming each docs file that differs from what the code generates.

:data:`SECTIONS` says, per design of :mod:`hw.designs`, which text goes into which docs file
and where: the whole file, the text from a begin marker to an end marker (both part of the
generated text), or a register map's own section (from its heading to the next heading of the
same or a higher level).
"""
import argparse
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hw.cc import regs as cc_regs  # noqa: E402
from hw.designs import DESIGNS, by_folder  # noqa: E402
from hw.gpushield import csr as bcu_csr  # noqa: E402
from hw.itx.regs import icu_register_map  # noqa: E402
from hw.sxp import regs as sxp_regs  # noqa: E402

__all__ = ["Section", "SECTIONS", "DOCS", "REPORTS", "select", "generate", "stale", "main"]

DOCS = ROOT / "docs"
REPORTS = ROOT / "sim_build" / "reports"


@dataclass(frozen=True)
class Section:
    """A generated part of ``docs/<doc>``, showing the register map(s) of *design*.

    *render* returns the text. With neither *begin* nor *end* it is the whole file; with both
    it runs from the line *begin* to the line *end*, the markers included; with *begin* only
    (a Markdown heading) it runs from that heading to the next heading of its level or higher,
    the blank lines before that heading excluded. *json*, if given, is ``(file name,
    RegisterMap factory)``: writing also leaves the map's JSON form in ``sim_build/reports/``.
    """
    design: str
    doc: str
    render: Callable[[], str]
    begin: str | None = None
    end: str | None = None
    json: tuple | None = None

    @property
    def block(self):
        return DESIGNS[self.design].folder

    def span(self, text):
        """(start, stop) of this section in *text*; ValueError if it cannot be found."""
        if self.begin is None:
            return 0, len(text)
        start = text.find(self.begin)
        if start < 0:
            raise ValueError(f"docs/{self.doc}: no {self.begin!r} to generate {self.design}'s registers after")
        if self.end is not None:
            stop = text.find(self.end, start)
            if stop < 0:
                raise ValueError(f"docs/{self.doc}: no {self.end!r} after {self.begin!r}")
            return start, stop + len(self.end)
        level = len(self.begin) - len(self.begin.lstrip("#"))
        heading = re.compile(rf"^#{{1,{level}}} ", re.M).search(text, start + len(self.begin))
        stop = start + len(text[start:heading.start() if heading else len(text)].rstrip("\n"))
        return start, stop + (text[stop:stop + 1] == "\n")


def _icu_table():
    return icu_register_map().markdown(heading="####")


SECTIONS = (
    Section("sxp", "registers.md", sxp_regs.doc_text, json=("sxp_regs.json", sxp_regs.register_map)),
    Section("cc_ctrl", "cc.md", cc_regs.doc_tables, cc_regs.DOC_BEGIN, cc_regs.DOC_END),
    Section("bcu_csr", "gpushield.md", bcu_csr.doc_table, bcu_csr.DOC_BEGIN, bcu_csr.DOC_END,
            json=("bcu_csr_regs.json", bcu_csr.register_map)),
    Section("itx_device", "itx.md", _icu_table, "#### Register map `icu`"),
)


def select(blocks=(), sections=SECTIONS):
    """The sections of *blocks* (block folders or design names; all sections if empty)."""
    if not blocks:
        return list(sections)
    designs = {name for block in blocks for name in by_folder(block)}
    chosen = [s for s in sections if s.design in designs]
    if not chosen:
        documented = sorted({s.block for s in sections} | {s.design for s in sections})
        raise ValueError(f"no generated docs for {' '.join(blocks)}; blocks and designs with "
                         f"generated docs: {', '.join(documented)}")
    return chosen


def generate(sections=SECTIONS, docs=DOCS):
    """{path: (current text, generated text)} of every docs file *sections* touch, under the
    folder *docs*; a missing file reads as empty."""
    files = {}
    for section in sections:
        path = Path(docs) / section.doc
        if path not in files:
            current = path.read_text() if path.exists() else ""
            files[path] = (current, current)
        current, text = files[path]
        start, stop = section.span(text)
        files[path] = (current, text[:start] + section.render() + text[stop:])
    return files


def stale(sections=SECTIONS, docs=DOCS):
    """The docs files that differ from what the code generates."""
    return [path for path, (current, text) in generate(sections, docs).items() if current != text]


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m scripts.gen_docs", description=__doc__.split("\n")[0])
    parser.add_argument("blocks", nargs="*", metavar="BLOCK", help="block folder or design (default: all)")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a docs file is stale")
    parser.add_argument("--docs", type=Path, default=DOCS, help="the docs folder (default: docs/)")
    args = parser.parse_args(argv)
    try:
        sections = select(args.blocks)
        files = generate(sections, args.docs)
    except ValueError as e:
        print(f"gen_docs: {e}", file=sys.stderr)
        return 2
    changed = {path: text for path, (current, text) in files.items() if current != text}
    if args.check:
        for path in changed:
            print(f"{path} is stale: run python -m scripts.gen_docs", file=sys.stderr)
        return 1 if changed else 0
    for path, text in changed.items():
        path.write_text(text)
        print(f"updated {path}")
    for section in sections:
        if section.json:
            name, regmap = section.json
            REPORTS.mkdir(parents=True, exist_ok=True)
            (REPORTS / name).write_text(regmap().to_json())
            print(f"wrote {REPORTS / name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
