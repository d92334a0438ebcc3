"""Unit test of the cocotb regression summary's session filter (tb/conftest.py): the
summary of one ``make sim`` counts its own results only, not those another run (a ``make
soak`` chunk, another ``make sim``, an earlier run) left in the same cases folder."""
import json

from tb import conftest
from tb.common.sim import CaseResult


def _write(folder, name, *results):
    (folder / f"{name}.json").write_text(json.dumps([r.__dict__ for r in results]))


def test_summary_counts_its_own_session_only(tmp_path):
    assert conftest.session_results(tmp_path / "none", "s1") == []
    mine = [CaseResult("test_aes::a", True, 100, 0.1, session="s1"),
            CaseResult("test_aes::b", False, 50, 0.2, "boom", session="s1")]
    _write(tmp_path, "test_aes", *mine)
    _write(tmp_path, "soak_gcm_17", CaseResult("soak_gcm_17::soak", True, 10**6, 9.0, session=""))
    _write(tmp_path, "test_bcu", CaseResult("test_bcu::x", True, 7, 0.1, session="s0"))
    assert conftest.session_results(tmp_path, "s1") == mine
    assert [r.test for r in conftest.session_results(tmp_path, "s0")] == ["test_bcu::x"]


def test_results_written_before_sessions_existed_still_load(tmp_path):
    """A case file from before this change has no session field: it loads, as no session's."""
    (tmp_path / "old.json").write_text(json.dumps([{"test": "t::a", "passed": True, "cycles": 1, "seconds": 0.0,
                                                    "message": ""}]))
    assert conftest.session_results(tmp_path, "s1") == []
    assert [r.test for r in conftest.session_results(tmp_path, "")] == ["t::a"]
