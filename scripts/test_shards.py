"""Unit tests of the regression's sharding (tb/common/shard.py, ``make sim SHARD=i/N``) and of
the merger of the shards' JUnit files (scripts/merge_junit.py). No simulator runs: the
pytest runs here collect or run tiny throwaway tests."""
import os
import random
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET

import pytest

from scripts.merge_junit import main as merge_main
from scripts.verilog import ROOT
from tb.common.shard import DEFAULT_WEIGHT, WEIGHTS, assign, parse_shard, select

REGRESSION = sorted(WEIGHTS) + ["tb/new/test_new.py::test_unweighed[a]", "tb/new/test_new.py::test_unweighed[b]"]


def _pytest(args, cwd):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


# ---- SHARD=i/N ----------------------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [("1/1", (1, 1)), ("3/5", (3, 5)), (" 2 / 2 ", (2, 2))])
def test_parse_shard(text, expected):
    assert parse_shard(text) == expected


@pytest.mark.parametrize("text, says", [("0/3", "counted from 1"), ("4/3", "must be 1 … 3"),
                                        ("x", "expected i/N"), ("1/0", "at least 1"),
                                        ("", "expected i/N"), ("1/2/3", "expected i/N"),
                                        ("-1/2", "expected i/N")])
def test_bad_shard_is_refused_with_a_reason(text, says):
    with pytest.raises(ValueError, match=f"SHARD={text!r}") as info:
        parse_shard(text)
    assert says in str(info.value), f"the error for SHARD={text!r} does not say {says!r}: {info.value}"


@pytest.mark.parametrize("count", range(1, 6))
def test_every_test_in_exactly_one_shard(count):
    shards = [select(REGRESSION, i, count) for i in range(1, count + 1)]
    placed = [n for shard in shards for n in shard]
    assert sorted(placed) == sorted(REGRESSION), f"N={count}: tests lost or placed twice"
    assert len(placed) == len(set(placed)), f"N={count}: a test is in two shards"
    if count <= len(REGRESSION):
        assert all(shards), f"N={count}: an empty shard although there are enough tests"


@pytest.mark.parametrize("count", range(1, 6))
def test_split_is_balanced(count):
    # greedy heaviest-first is within one test of the mean: no shard exceeds the mean by more
    # than the heaviest test
    loads = {i: 0 for i in range(1, count + 1)}
    for nodeid, shard in assign(REGRESSION, count).items():
        loads[shard] += WEIGHTS.get(nodeid, DEFAULT_WEIGHT)
    mean = sum(loads.values()) / count
    heaviest = max(WEIGHTS.values())
    assert max(loads.values()) <= mean + heaviest, f"N={count}: loads {loads}"


def test_split_by_hand():
    # heaviest first, each to the lightest shard so far, ties to the lower shard:
    # a 5 → 1 (5), b 4 → 2 (4), c 3 → 2 (7), d 2 → 1 (7), e 2 → 1 (tie, 9)
    costs = {"a": 5, "b": 4, "c": 3, "d": 2, "e": 2}
    assert assign(list(costs), 2, costs.get) == {"a": 1, "b": 2, "c": 2, "d": 1, "e": 1}


def test_split_is_deterministic():
    first = assign(REGRESSION, 3)
    shuffled = REGRESSION[:]
    random.Random(7).shuffle(shuffled)
    assert assign(shuffled, 3) == first, "the split depends on the order the tests were collected in"
    # ... and on nothing of the process: two interpreters with different hash seeds agree
    code = ("from scripts.test_shards import REGRESSION; from tb.common.shard import assign; "
            "print(sorted(assign(REGRESSION, 4).items()))")
    outputs = {subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True,
                              env={**os.environ, "PYTHONPATH": str(ROOT), "PYTHONHASHSEED": seed}).stdout
               for seed in ("1", "2")}
    assert len(outputs) == 1, f"the split differs between processes: {outputs}"


def test_weights_name_collected_tests():
    # a renamed or removed test leaves a stale weight behind: its replacement weighs DEFAULT_WEIGHT
    run = _pytest(["tb", "--collect-only", "-q"], ROOT)
    collected = {line.strip() for line in run.stdout.splitlines() if "::" in line}
    assert collected, f"collecting tb found no test:\n{run.stdout[-2000:]}{run.stderr[-2000:]}"
    stale = sorted(set(WEIGHTS) - collected)
    assert not stale, f"tb/common/shard.py WEIGHTS names tests that do not exist (rename them): {stale}"


# ---- the pytest plugin ---------------------------------------------------------------------

@pytest.fixture
def suite(tmp_path):
    """A throwaway test folder of 7 quick tests (one fails when FAIL_ME is set)."""
    (tmp_path / "test_a.py").write_text(textwrap.dedent("""
        import os
        import pytest

        @pytest.mark.parametrize("n", range(4))
        def test_a(n):
            assert not (n == 2 and os.environ.get("FAIL_ME")), "failed on purpose"
        """))
    (tmp_path / "test_b.py").write_text("def test_b1():\n    pass\n\n\ndef test_b2():\n    pass\n\n\n"
                                        "def test_b3():\n    pass\n")
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    return tmp_path


def _collected(run):
    return [line.strip() for line in run.stdout.splitlines() if "::" in line]


def test_plugin_splits_collected_tests(suite):
    every = _collected(_pytest(["--collect-only", "-q"], suite))
    assert len(every) == 7
    for count in (1, 2, 3):
        shards = [_collected(_pytest(["-p", "tb.common.shard", "--shard", f"{i}/{count}", "--collect-only", "-q"],
                                     suite)) for i in range(1, count + 1)]
        placed = [n for shard in shards for n in shard]
        assert sorted(placed) == sorted(every), f"N={count}: shards {shards}"


@pytest.mark.parametrize("value, says", [("0/3", "counted from 1"), ("x", "expected i/N"), ("1/0", "at least 1")])
def test_plugin_refuses_bad_shard(suite, value, says):
    run = _pytest(["-p", "tb.common.shard", "--shard", value, "-q"], suite)
    assert run.returncode == 4, f"--shard {value}: exit {run.returncode}, not pytest's usage error (4)"
    assert says in run.stderr, f"--shard {value}: the error does not say {says!r}:\n{run.stderr}"


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_plugin_empty_shard_passes(suite, workers):
    if workers:
        pytest.importorskip("xdist")
    (suite / "test_b.py").unlink()
    (suite / "test_a.py").write_text("def test_only():\n    pass\n")
    xml = suite / "sim-2of2.xml"
    run = _pytest(["-p", "tb.common.shard", "--shard", "2/2", *workers, f"--junitxml={xml}", "-q"], suite)
    assert run.returncode == 0, f"an empty shard failed (exit {run.returncode}):\n{run.stdout}{run.stderr}"
    assert ET.parse(xml).getroot().find("testsuite").get("tests") == "0"


def test_plugin_with_xdist_runs_the_shard(suite):
    pytest.importorskip("xdist")
    expected = _collected(_pytest(["-p", "tb.common.shard", "--shard", "2/3", "--collect-only", "-q"], suite))
    xml = suite / "out.xml"
    run = _pytest(["-p", "tb.common.shard", "--shard", "2/3", "-n", "2", "--dist", "loadfile",
                   f"--junitxml={xml}", "-q"], suite)
    assert run.returncode == 0, run.stdout + run.stderr
    ran = {f"{c.get('classname').replace('.', '/')}.py::{c.get('name')}"
           for c in ET.parse(xml).getroot().iter("testcase")}
    assert ran == set(expected), f"xdist ran {sorted(ran)}, the shard is {expected}"


def test_make_sim_passes_the_shard():
    run = subprocess.run(["make", "-n", "sim", "SHARD=2/3", "BLOCK=aes", "JOBS=2"], cwd=ROOT,
                         capture_output=True, text=True)
    assert "-p tb.common.shard --shard 2/3" in run.stdout, run.stdout
    assert "--junitxml=sim_build/reports/sim-2of3.xml" in run.stdout, run.stdout
    assert "-n 2 --dist loadfile" in run.stdout, run.stdout


# ---- merging the shards' JUnit files -------------------------------------------------------

def _junit(tests, failures=0, errors=0, skipped=0, time=1.5, name="t"):
    cases = "".join(f'<testcase classname="m" name="{name}{k}" time="0.1"/>' for k in range(tests))
    return (f'<?xml version="1.0" encoding="utf-8"?><testsuites name="pytest tests"><testsuite name="pytest" '
            f'errors="{errors}" failures="{failures}" skipped="{skipped}" tests="{tests}" time="{time}">'
            f"{cases}</testsuite></testsuites>")


def test_merge_sums_counts(tmp_path, capsys):
    (tmp_path / "sim-1of3.xml").write_text(_junit(4, skipped=1, time=10.0, name="a"))
    (tmp_path / "sim-2of3.xml").write_text(_junit(0, time=0.5, name="b"))
    (tmp_path / "sim-3of3.xml").write_text(_junit(6, skipped=2, time=20.25, name="c"))
    out = tmp_path / "merged" / "sim.xml"
    assert merge_main([str(tmp_path), "--out", str(out)]) == 0
    line = capsys.readouterr().out
    assert "3 of 3 shards: 10 tests, 0 failures, 0 errors, 3 skipped" in line, line
    root = ET.parse(out).getroot()
    assert {k: root.get(k) for k in ("tests", "failures", "errors", "skipped", "time")} == \
        {"tests": "10", "failures": "0", "errors": "0", "skipped": "3", "time": "30.750"}
    assert len(list(root.iter("testcase"))) == 10
    assert [s.get("name") for s in root.iter("testsuite")] == [f"pytest shard {i}/3" for i in (1, 2, 3)]


def test_merge_detects_a_missing_shard(tmp_path, capsys):
    (tmp_path / "sim-1of3.xml").write_text(_junit(2))
    (tmp_path / "sim-3of3.xml").write_text(_junit(2))
    out = tmp_path / "sim.xml"
    assert merge_main([str(tmp_path), "--out", str(out)]) == 1
    line = capsys.readouterr().out
    assert "missing shard 2/3" in line and line.startswith("FAILED"), line
    assert ET.parse(out).getroot().get("tests") == "4"     # what there is, merged all the same


def test_merge_detects_a_missing_last_shard_with_shards_given(tmp_path, capsys):
    # the file names of shards 1 and 2 cannot tell that there were 4: --shards does
    (tmp_path / "sim-1of4.xml").write_text(_junit(1))
    (tmp_path / "sim-2of4.xml").write_text(_junit(1))
    (tmp_path / "sim-1of2.xml").write_text(_junit(1))      # a stale file of another split
    assert merge_main([str(tmp_path), "--shards", "4", "--out", str(tmp_path / "sim.xml")]) == 1
    line = capsys.readouterr().out
    assert "missing shard 3/4" in line and "missing shard 4/4" in line, line


def test_merge_detects_a_failing_shard(tmp_path, capsys):
    (tmp_path / "sim-1of2.xml").write_text(_junit(3))
    (tmp_path / "sim-2of2.xml").write_text(_junit(3, failures=1, errors=1))
    assert merge_main([str(tmp_path), "--out", str(tmp_path / "sim.xml")]) == 1
    line = capsys.readouterr().out
    assert "6 tests, 1 failures, 1 errors" in line and "failing shard 2/2" in line, line


def test_merge_refuses_unusable_input(tmp_path, capsys):
    assert merge_main([str(tmp_path), "--out", str(tmp_path / "sim.xml")]) == 1
    assert "no shard files" in capsys.readouterr().err
    (tmp_path / "sim-1of2.xml").write_text(_junit(1))
    (tmp_path / "sim-1of3.xml").write_text(_junit(1))
    assert merge_main([str(tmp_path), "--out", str(tmp_path / "sim.xml")]) == 1
    assert "give --shards N" in capsys.readouterr().err
    (tmp_path / "sim-1of3.xml").unlink()
    (tmp_path / "sim-2of2.xml").write_text("<testsuites><testsuite tests='1'")   # cut short
    assert merge_main([str(tmp_path), "--out", str(tmp_path / "sim.xml")]) == 1
    assert "unreadable shard 2/2" in capsys.readouterr().out


def test_merge_of_real_pytest_shards(suite, capsys):
    # end to end: pytest writes the shard files (one test fails), the merger sums them
    env_fail = {**os.environ, "PYTHONPATH": str(ROOT), "FAIL_ME": "1"}
    for i in (1, 2):
        subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "tb.common.shard",
                        "--shard", f"{i}/2", f"--junitxml={suite}/reports/sim-{i}of2.xml", "-q"],
                       cwd=suite, env=env_fail, capture_output=True, check=False, timeout=120)
    assert merge_main([str(suite / "reports"), "--out", str(suite / "sim.xml")]) == 1
    line = capsys.readouterr().out
    assert "2 of 2 shards: 7 tests, 1 failures, 0 errors, 0 skipped" in line, line
