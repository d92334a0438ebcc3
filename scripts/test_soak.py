"""Unit tests of the soak driver (scripts/soak.py, ``make soak``): seed lists, chunks,
sharding, verdicts and the report. No simulator runs: a fake chunk runner stands in for
the cocotb campaigns (their smoke test is tb/common/test_soak.py, in ``make sim``)."""
import json

import pytest

from scripts import soak
from scripts.soak import (
    CAMPAIGNS,
    ChunkResult,
    chunks,
    endless_chunks,
    run_campaign,
    seed_list,
    shard_chunks,
    verdict_line,
    write_report,
)

# ---- seeds --------------------------------------------------------------------------------

def test_seed_list_is_reproducible_and_extends():
    a = seed_list(1234, "gcm", 10)
    assert a == seed_list(1234, "gcm", 10), "the same base seed gave another list"
    assert seed_list(1234, "gcm", 25)[:10] == a, "a longer list does not start with the shorter one"


def test_seeds_differ_by_base_campaign_and_position():
    a = seed_list(1, "gcm", 200)
    assert len(set(a)) == 200, "repeated seeds in one list"
    assert not set(a) & set(seed_list(2, "gcm", 200)), "two base seeds share seeds"
    assert not set(a) & set(seed_list(1, "bcu", 200)), "two campaigns share seeds"


def test_seeds_fit_the_simulator():
    assert all(1 <= s < 1 << 31 for s in seed_list(99, "sxp_system", 1000)), "a seed outside 1 .. 2**31 - 1"


def test_negative_seed_count_is_refused():
    with pytest.raises(ValueError, match=">= 0"):
        seed_list(1, "gcm", -1)


# ---- chunks and shards ------------------------------------------------------------------------

@pytest.mark.parametrize("count, per_seed, sizes", [(10, 3, [3, 3, 3, 1]), (9, 3, [3, 3, 3]), (1, 500, [1]),
                                                     (1000, 1000, [1000])])
def test_chunks_cover_the_count(count, per_seed, sizes):
    got = chunks(7, "gcm", count, per_seed)
    assert [c.attempts for c in got] == sizes
    assert [c.index for c in got] == list(range(len(sizes)))
    assert [c.seed for c in got] == seed_list(7, "gcm", len(sizes)), "chunk k does not run seed k"


@pytest.mark.parametrize("count, per_seed", [(0, 5), (5, 0), (-1, 5)])
def test_bad_chunking_is_refused(count, per_seed):
    with pytest.raises(ValueError, match="count >= 1 and per_seed >= 1"):
        chunks(1, "gcm", count, per_seed)


@pytest.mark.parametrize("total", range(1, 7))
def test_shards_take_every_nth_chunk_exactly_once(total):
    everything = chunks(5, "bcu", 23, 2)
    shards = [shard_chunks(everything, i, total) for i in range(1, total + 1)]
    placed = [c for s in shards for c in s]
    assert sorted(placed, key=lambda c: c.index) == everything, f"N={total}: chunks lost or doubled"
    for i, s in enumerate(shards, 1):
        assert all(c.index % total == i - 1 for c in s), f"shard {i}/{total} took a chunk of another shard"


@pytest.mark.parametrize("index, total", [(0, 3), (4, 3), (1, 0)])
def test_bad_shard_is_refused(index, total):
    with pytest.raises(ValueError, match="counted"):
        shard_chunks([], index, total)


def test_timed_chunks_follow_the_same_seed_list_and_split():
    base = 11
    stream = endless_chunks(base, "gcm", 4, index=2, total=3, batch=5)
    got = [next(stream) for _ in range(12)]
    seeds = seed_list(base, "gcm", 40)
    assert [c.index for c in got] == [1 + 3 * k for k in range(12)], "timed shard 2/3 is not every 3rd seed"
    assert [c.seed for c in got] == [seeds[c.index] for c in got]
    assert all(c.attempts == 4 for c in got)


# ---- verdicts ---------------------------------------------------------------------------------

def _runner(bad=None, cycles=100):
    """A fake chunk runner: every chunk passes, except the chunk indices in *bad*
    (index -> (accepted, lost, passed))."""
    ran = []

    def run(chunk):
        ran.append(chunk)
        accepted, lost, passed = (bad or {}).get(chunk.index, (0, 0, True))
        return ChunkResult(chunk.seed, chunk.attempts, accepted, lost, cycles, seconds=0.01, sim_seconds=0.005,
                           passed=passed, message="" if passed else "a check failed")
    return run, ran


def test_campaign_passes_and_prints_seeds_and_one_verdict():
    lines = []
    run, ran = _runner()
    r = run_campaign("gcm", count=25, base_seed=3, per_seed=10, runner=run, say=lines.append)
    assert r.verdict == "PASS" and r.attempts == 25 and r.cycles == 300
    assert r.seeds == seed_list(3, "gcm", 3) == [c.seed for c in ran]
    assert all(str(s) in lines[0] for s in r.seeds), f"the seed list is not printed first: {lines[0]}"
    assert lines[-1] == verdict_line(r) and lines[-1].startswith("soak gcm: PASS")
    assert "25 frames, 0 accepted, 0 lost" in lines[-1]


@pytest.mark.parametrize("bad, says", [({1: (1, 0, False)}, "1 accepted"), ({0: (0, 2, False)}, "2 lost"),
                                       ({2: (0, 0, False)}, "0 accepted")])
def test_a_failing_chunk_fails_the_campaign_and_names_its_seed(bad, says):
    run, _ = _runner(bad)
    r = run_campaign("bcu", count=30, base_seed=8, per_seed=10, runner=run, say=lambda _: None)
    seed = seed_list(8, "bcu", 3)[next(iter(bad))]
    assert r.verdict == "FAIL" and r.failed_seeds == [seed]
    line = verdict_line(r)
    assert line.startswith("soak bcu: FAIL") and says in line and str(seed) in line.split("failing seeds")[1]


def test_accepted_or_lost_fail_even_if_the_chunk_says_passed():
    run, _ = _runner({0: (1, 0, True)})
    assert run_campaign("gcm", count=5, base_seed=1, runner=run, say=lambda _: None).verdict == "FAIL"


def test_shard_runs_its_part_of_the_same_campaign():
    parts = []
    for i in (1, 2, 3):
        run, ran = _runner()
        run_campaign("sxp_system", count=70, shard=(i, 3), base_seed=4, per_seed=10, runner=run, say=lambda _: None)
        parts.append(ran)
    assert sorted(c.index for p in parts for c in p) == list(range(7))
    assert sum(c.attempts for p in parts for c in p) == 70


def test_hours_run_until_the_deadline(monkeypatch):
    # a fake clock: each chunk takes 100 s, the campaign 0.1 h = 360 s, so chunks start at
    # 0, 100, 200 and 300 s and the fifth would start at 400 s, past the deadline
    now = [1000.0]

    class Clock:
        @staticmethod
        def monotonic():
            return now[0]

    def run(chunk):
        now[0] += 100
        return ChunkResult(chunk.seed, chunk.attempts, 0, 0, 1, seconds=100, passed=True)
    monkeypatch.setattr(soak, "time", Clock)
    r = run_campaign("gcm", hours=0.1, base_seed=2, per_seed=5, runner=run, say=lambda _: None)
    assert len(r.chunks) == 4, f"{len(r.chunks)} chunks in 360 s of 100 s chunks, expected 4"
    assert r.verdict == "PASS" and r.attempts == 20 and r.wall_seconds == 400
    assert r.seeds == seed_list(2, "gcm", 4)


@pytest.mark.parametrize("kw, says", [({"count": 5, "hours": 1}, "not both"), ({"count": 0}, "at least 1"),
                                      ({"hours": 0}, "more than 0")])
def test_bad_campaign_arguments_are_refused(kw, says):
    with pytest.raises(ValueError, match=says):
        run_campaign("gcm", runner=_runner()[0], say=lambda _: None, **kw)


def test_unknown_campaign_is_refused():
    with pytest.raises(ValueError, match="campaigns: sxp_system, gcm, bcu"):
        run_campaign("aes", count=1, runner=_runner()[0])


def test_campaigns_meet_the_issue_targets():
    assert CAMPAIGNS["sxp_system"].target >= 100_000
    assert CAMPAIGNS["gcm"].target >= 1_000_000 and CAMPAIGNS["bcu"].target >= 1_000_000


# ---- command line and report --------------------------------------------------------------------

@pytest.mark.parametrize("argv, says", [(["--shard", "0/2"], "counted from 1"), (["nope"], "no soak campaign"),
                                        (["--count", "3", "--hours", "1"], "not both"),
                                        (["gcm", "bcu", "--rerun", "5"], "needs one campaign")])
def test_main_refuses_bad_arguments_before_running(argv, says, capsys, monkeypatch):
    monkeypatch.setattr(soak, "_run_chunk", lambda *a, **k: pytest.fail("a chunk ran"))
    assert soak.main(argv) == 2
    assert says in capsys.readouterr().err


def test_report_holds_what_the_issue_asks(tmp_path):
    run, _ = _runner({1: (2, 1, False)})
    r = run_campaign("gcm", count=20, base_seed=6, per_seed=10, runner=run, say=lambda _: None)
    path = write_report([r], (1, 1), tmp_path / "soak.json")
    data = json.loads(path.read_text())
    (c,) = data["campaigns"]
    for key in ("campaign", "seeds", "attempts", "accepted", "lost", "cycles", "wall_seconds", "verdict"):
        assert key in c, f"the report has no {key}"
    assert (c["campaign"], c["attempts"], c["accepted"], c["lost"], c["verdict"]) == ("gcm", 20, 2, 1, "FAIL")
    assert c["failed_seeds"] == [seed_list(6, "gcm", 2)[1]] and data["shard"] == "1/1"


def test_shard_report_is_named_after_the_shard(tmp_path, monkeypatch):
    monkeypatch.setattr(soak, "REPORTS", tmp_path)
    assert write_report([], (2, 3)).name == "soak-2of3.json"
    assert write_report([], (1, 1)).name == "soak.json"



def test_failing_seed_is_saved_and_rerun_with_waves(tmp_path, monkeypatch):
    calls = []

    def fake_chunk(campaign, chunk, waves_dir=None):
        calls.append((chunk.seed, waves_dir))
        waves = ""
        if waves_dir is not None:
            (waves_dir / "waves.fst").write_bytes(b"trace")
            waves = str(waves_dir / "waves.fst")
        passed = chunk.index != 1
        return ChunkResult(chunk.seed, chunk.attempts, 0 if passed else 1, 0, 10, seconds=1.0, passed=passed,
                           message="" if passed else "accepted a forged tag", waves=waves)
    monkeypatch.setattr(soak, "SOAK_DIR", tmp_path)
    monkeypatch.setattr(soak, "_run_chunk", fake_chunk)
    r = run_campaign("gcm", count=30, base_seed=5, per_seed=10, say=lambda _: None)
    bad = seed_list(5, "gcm", 3)[1]
    folder = tmp_path / "gcm" / str(bad)
    assert r.verdict == "FAIL" and r.failed_seeds == [bad]
    assert [c for c in calls if c[1] is not None] == [(bad, folder)], f"reruns with waves: {calls}"
    assert (folder / "seed.txt").read_text().strip() == str(bad)
    assert "accepted a forged tag" in (folder / "failure.txt").read_text()
    assert f"RERUN={bad}" in (folder / "failure.txt").read_text()
    assert r.chunks[1]["waves"] == str(folder / "waves.fst")


def test_an_empty_shard_passes():
    run, ran = _runner()
    r = run_campaign("gcm", count=5, shard=(2, 2), base_seed=1, per_seed=10, runner=run, say=lambda _: None)
    assert not ran and r.verdict == "PASS" and r.attempts == 0 and "0 seeds" in verdict_line(r)
