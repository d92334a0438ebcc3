"""The generated register tables in docs/ are up to date (``python -m scripts.gen_docs --check``),
and the check catches a stale table: on copies of docs/, never the real files."""
import shutil

import pytest

from hw.designs import DESIGNS
from scripts import gen_docs
from scripts.gen_docs import DOCS, SECTIONS, main, select, stale


def test_docs_are_up_to_date(capsys):
    assert main(["--check"]) == 0, capsys.readouterr().err


def test_sections_name_designs_and_docs():
    for section in SECTIONS:
        assert section.design in DESIGNS
        assert (DOCS / section.doc).is_file()


@pytest.fixture
def copy(tmp_path, monkeypatch):
    """A copy of docs/; reports go to the temporary folder too."""
    monkeypatch.setattr(gen_docs, "REPORTS", tmp_path / "reports")
    return shutil.copytree(DOCS, tmp_path / "docs")


@pytest.mark.parametrize("section", SECTIONS, ids=[s.design for s in SECTIONS])
def test_check_names_the_stale_file_and_writing_restores_it(section, copy, capsys):
    path = copy / section.doc
    original = path.read_text()
    start, stop = section.span(original)
    middle = (start + stop) // 2
    path.write_text(original[:middle] + "stale" + original[middle:])
    assert stale(docs=copy) == [path]
    assert main(["--check", "--docs", str(copy)]) == 1
    assert f"{path} is stale" in capsys.readouterr().err
    assert main(["--docs", str(copy), section.block]) == 0
    assert path.read_text() == original
    assert main(["--check", "--docs", str(copy)]) == 0


def test_text_around_a_section_is_kept(copy):
    path = copy / "itx.md"
    text = path.read_text().replace("## Devices: where", "## Devices (edited): where")
    path.write_text(text)
    assert main(["--docs", str(copy), "itx"]) == 0 and path.read_text() == text


def test_missing_marker_is_an_error(copy, capsys):
    path = copy / "cc.md"
    path.write_text(path.read_text().replace("<!-- END generated -->", ""))
    assert main(["--check", "--docs", str(copy)]) == 2
    assert "docs/cc.md: no '<!-- END generated -->'" in capsys.readouterr().err


def test_select_by_block_or_design():
    assert [s.design for s in select(["gpushield"])] == ["bcu_csr"]
    assert [s.design for s in select(["cc_ctrl", "sxp"])] == ["sxp", "cc_ctrl"]
    with pytest.raises(ValueError, match="no generated docs for aes"):
        select(["aes"])
