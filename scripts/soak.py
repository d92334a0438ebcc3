"""Soak runs: long randomised campaigns with fresh seeds (``make soak``).

``python -m scripts.soak [CAMPAIGN …] [--count N | --hours H] [--shard i/N] [--seed BASE]``

A campaign (:data:`CAMPAIGNS`) is a cocotb module beside its block that runs *n* random
attempts on one design and writes its tallies (attempts, accepted bad items, lost good
items, simulated cycles) to the JSON file named by ``SOAK_STATS``; it fails (an assertion)
when a check fails. The driver cuts a campaign into *chunks* of ``per_seed`` attempts, one
simulator run per chunk, each with its own seed:

- the seeds are a list derived from one *base seed* (:func:`seed_list`: SHA-256 of
  ``"<base>:<campaign>:<k>"``), printed before the run, so the base seed reproduces the
  whole campaign and chunk *k* is reproducible on its own from its seed (``SEED=``);
  without ``--seed`` (``SEED=``) the base seed is fresh (from the OS) every run;
- ``--count N`` runs ⌈N / per_seed⌉ chunks (the last one shorter), ``--hours H`` runs chunks
  until H hours have passed (a chunk that has started finishes), neither: the campaign's
  target (:attr:`Campaign.target`);
- ``--shard i/N`` (``make soak SHARD=i/N``) runs chunks *k* with ``k mod N = i - 1``, the
  same seed-splitting idea as ``make sim SHARD=i/N`` (every N-th seed), so N machines share
  a campaign and run every chunk exactly once, with the same base seed;
- each campaign ends with one verdict line (:func:`verdict_line`), PASS when every chunk
  passed and nothing bad was accepted and nothing good lost;
- a failing chunk's seed is saved in ``sim_build/soak/<campaign>/<seed>/`` (``seed.txt``,
  ``failure.txt``, the run's ``sim.log``) and the chunk is rerun with that seed and waves
  (FST, or VCD without the lz4 headers: :mod:`tb.common.toolchain`) into
  ``sim_build/soak/<campaign>/<seed>/waves.fst``.

The report (``sim_build/reports/soak.json``, ``soak-<i>of<N>.json`` for a shard) has per
campaign the seeds, attempts, accepted, lost, cycles, wall seconds and the verdict.
"""
import argparse
import hashlib
import json
import os
import shutil
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tb.common.shard import parse_shard  # noqa: E402

__all__ = ["Campaign", "CAMPAIGNS", "Chunk", "ChunkResult", "CampaignReport", "seed_list", "chunks",
           "shard_chunks", "fresh_base_seed", "verdict_line", "run_campaign", "main", "SOAK_DIR"]

SOAK_DIR = ROOT / "sim_build" / "soak"
REPORTS = ROOT / "sim_build" / "reports"
SEED_BITS = 31          # cocotb takes a seed that fits a C int


@dataclass(frozen=True)
class Campaign:
    name: str
    design: str         # hw.designs name
    module: str         # the cocotb module that runs one chunk
    unit: str           # what an attempt is (for the messages)
    target: int         # attempts of a full campaign (issue 17)
    per_seed: int       # attempts per chunk (one simulator run, one seed)
    params: dict = field(default_factory=dict)


CAMPAIGNS = {c.name: c for c in (
    # same build as the regression's test_sxp_system[sxp_system] (4 contexts, 16 table entries)
    Campaign("sxp_system", "sxp_system", "tb.system.soak_system", "attacks", 100_000, 500,
             {"contexts": 4, "entries": 16}),
    Campaign("gcm", "gcm_core", "tb.gcm.soak_gcm", "frames", 1_000_000, 10_000),
    Campaign("bcu", "bcu", "tb.gpushield.soak_gpushield", "warps", 1_000_000, 50_000),
)}


# ---- seeds and chunks (pure functions: scripts/test_soak.py) ----------------------------

def seed_list(base, campaign, count):
    """*count* seeds of *campaign* derived from the base seed *base*: seed *k* depends only
    on (base, campaign, k), so a longer list extends a shorter one and campaigns differ."""
    if count < 0:
        raise ValueError(f"seed count must be >= 0, not {count}")
    return [int.from_bytes(hashlib.sha256(f"{base}:{campaign}:{k}".encode()).digest()[:8], "big")
            % ((1 << SEED_BITS) - 1) + 1 for k in range(count)]


def fresh_base_seed():
    return int.from_bytes(os.urandom(4), "big") >> (32 - SEED_BITS)


@dataclass(frozen=True)
class Chunk:
    index: int          # k: position in the campaign's seed list
    seed: int
    attempts: int


def chunks(base, campaign, count, per_seed):
    """The chunks of a campaign of *count* attempts: ⌈count / per_seed⌉ of *per_seed* (the
    last one what is left)."""
    if count < 1 or per_seed < 1:
        raise ValueError(f"a campaign needs count >= 1 and per_seed >= 1 (got {count}, {per_seed})")
    n = -(-count // per_seed)
    return [Chunk(k, s, min(per_seed, count - k * per_seed))
            for k, s in enumerate(seed_list(base, campaign, n))]


def shard_chunks(items, index, total):
    """Shard *index* (1-based) of *total*: the items at positions k with k mod total = index - 1."""
    if not 1 <= index <= total:
        raise ValueError(f"shard {index} of {total}: shards are counted 1 … {total}")
    return [c for k, c in enumerate(items) if k % total == index - 1]


def endless_chunks(base, campaign, per_seed, index=1, total=1, batch=64):
    """Chunks of *per_seed* attempts for a timed run, shard *index* of *total*: seed k of
    the endless list goes to shard k mod total, as :func:`shard_chunks` does."""
    k = 0
    while True:
        seeds = seed_list(base, campaign, k + batch)[k:]
        for j, s in enumerate(seeds):
            if (k + j) % total == index - 1:
                yield Chunk(k + j, s, per_seed)
        k += batch


@dataclass
class ChunkResult:
    seed: int
    attempts: int = 0       # attempts made (the chunk asked for Chunk.attempts)
    accepted: int = 0       # bad items the design let through
    lost: int = 0           # good items that did not come through intact
    cycles: int = 0
    seconds: float = 0.0    # wall time of the chunk: conversion check, simulator start, run
    sim_seconds: float = 0.0    # wall time of the cocotb test itself (cocotb's own figure)
    passed: bool = False
    message: str = ""
    detail: dict = field(default_factory=dict)   # the campaign's own tallies
    waves: str = ""


@dataclass
class CampaignReport:
    campaign: str
    unit: str
    base_seed: int
    shard: str
    seeds: list = field(default_factory=list)
    attempts: int = 0
    accepted: int = 0
    lost: int = 0
    cycles: int = 0
    wall_seconds: float = 0.0
    sim_seconds: float = 0.0
    failed_seeds: list = field(default_factory=list)
    chunks: list = field(default_factory=list)
    verdict: str = "FAIL"

    def add(self, result):
        self.chunks.append(asdict(result))
        self.attempts += result.attempts
        self.accepted += result.accepted
        self.lost += result.lost
        self.cycles += result.cycles
        self.sim_seconds = round(self.sim_seconds + result.sim_seconds, 2)
        if not result.passed:
            self.failed_seeds.append(result.seed)

    def close(self, wall):
        self.wall_seconds = round(wall, 1)
        # a shard may have no chunk (more shards than chunks): a pass, as an empty `make sim` shard
        ok = not self.failed_seeds and self.accepted == 0 and self.lost == 0
        self.verdict = "PASS" if ok else "FAIL"
        return self


def verdict_line(r):
    """One line: the verdict, the tallies and the throughput of a campaign."""
    rate = f"{r.attempts / r.wall_seconds:.1f} {r.unit}/s, {r.cycles / r.wall_seconds:.0f} cycles/s" \
        if r.wall_seconds else "no time measured"
    if r.sim_seconds:
        rate += (f"; in the simulations {r.sim_seconds:.1f} s: {r.attempts / r.sim_seconds:.1f} {r.unit}/s, "
                 f"{r.cycles / r.sim_seconds:.0f} cycles/s")
    failed = f"; failing seeds {' '.join(map(str, r.failed_seeds))}" if r.failed_seeds else ""
    return (f"soak {r.campaign}: {r.verdict} — {r.attempts} {r.unit}, {r.accepted} accepted, "
            f"{r.lost} lost, {r.cycles} cycles in {r.wall_seconds:.1f} s ({rate}); "
            f"{len(r.chunks)} seeds, shard {r.shard}, base seed {r.base_seed}{failed}")


# ---- running chunks -----------------------------------------------------------------------

def _run_name(campaign, chunk):
    return f"soak_{campaign.name}_{chunk.seed}"


def _run_chunk(campaign, chunk, waves_dir=None):
    """One simulator run of *chunk* (with waves into *waves_dir* if given): a ChunkResult."""
    import pytest

    from tb.common import sim

    out = SOAK_DIR / campaign.name
    out.mkdir(parents=True, exist_ok=True)
    stats_file = out / f"stats-{chunk.seed}.json"
    stats_file.unlink(missing_ok=True)
    saved = {k: os.environ.get(k) for k in ("SEED", "WAVES", "WAVE_FILE", "PYTEST_CURRENT_TEST", "TESTCASE")}
    os.environ["SEED"] = str(chunk.seed)
    os.environ.pop("TESTCASE", None)
    # tb.common.sim names the run's folder (sim_build/tests/<name>/) after the pytest test:
    # one per seed, so that shards running side by side in one work tree keep apart
    os.environ["PYTEST_CURRENT_TEST"] = f"soak::{_run_name(campaign, chunk)} (call)"
    if waves_dir is not None:
        waves_dir.mkdir(parents=True, exist_ok=True)
        os.environ["WAVES"] = "1"
        from tb.common.toolchain import wave_format
        os.environ["WAVE_FILE"] = str(waves_dir / f"waves.{wave_format()}")
    else:
        os.environ.pop("WAVES", None)
        os.environ.pop("WAVE_FILE", None)
    result = ChunkResult(chunk.seed)
    start = time.monotonic()
    try:
        cases = sim.run(campaign.design, campaign.module, params=campaign.params,
                        extra_env={"SOAK_COUNT": str(chunk.attempts), "SOAK_STATS": str(stats_file)})
        result.passed = True
        result.cycles = sum(c.cycles for c in cases)
        result.sim_seconds = round(sum(c.seconds for c in cases), 2)
    except (pytest.fail.Exception, pytest.skip.Exception, Exception) as e:     # noqa: B014
        result.message = str(e).strip()
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    result.seconds = round(time.monotonic() - start, 2)
    if stats_file.exists():
        stats = json.loads(stats_file.read_text())
        stats_file.unlink()
        result.attempts, result.accepted, result.lost = stats["attempts"], stats["accepted"], stats["lost"]
        result.cycles = stats.get("cycles", result.cycles)
        result.detail = stats.get("detail", {})
        if result.passed and (result.accepted or result.lost or result.attempts < chunk.attempts):
            result.passed = False
            result.message = (f"{result.accepted} accepted, {result.lost} lost, "
                              f"{result.attempts} of {chunk.attempts} attempts made")
    elif result.passed:
        result.passed = False
        result.message = f"{campaign.module} wrote no tallies ({stats_file})"
    if waves_dir is not None:
        traces = sorted(waves_dir.glob("waves.*"))
        result.waves = str(traces[0]) if traces else ""
    return result


def _save_failure(campaign, chunk, result, waves=True):
    """Keep a failing chunk's seed, message and log; rerun it with waves into the same folder."""
    folder = SOAK_DIR / campaign.name / str(chunk.seed)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "seed.txt").write_text(f"{chunk.seed}\n")
    (folder / "failure.txt").write_text(
        f"campaign {campaign.name}, chunk {chunk.index}, seed {chunk.seed}, {chunk.attempts} {campaign.unit}\n"
        f"reproduce (with waves): make soak CAMPAIGN={campaign.name} RERUN={chunk.seed} COUNT={chunk.attempts}\n\n"
        f"{result.message}\n")
    log = ROOT / "sim_build" / "tests" / _run_name(campaign, chunk) / "sim.log"
    if log.exists():
        shutil.copyfile(log, folder / "sim.log")
    if waves:
        print(f"[soak] {campaign.name}: seed {chunk.seed} failed; rerunning it with waves into {folder}/",
              flush=True)
        again = _run_chunk(campaign, chunk, waves_dir=folder)
        result.waves = again.waves
        print(f"[soak] {campaign.name}: rerun of seed {chunk.seed} "
              f"{'failed again' if not again.passed else 'PASSED (not reproducible?)'}; "
              f"waves {result.waves or 'not written'}", flush=True)
    return folder


def run_campaign(name, count=None, hours=None, shard=(1, 1), base_seed=None, per_seed=None,
                 waves_on_failure=True, runner=None, say=print):
    """Run campaign *name* (or its shard); returns its :class:`CampaignReport`. *runner*
    (chunk → ChunkResult) replaces the simulator run (the unit tests use it)."""
    if name not in CAMPAIGNS:
        raise ValueError(f"no soak campaign {name!r}; campaigns: {', '.join(CAMPAIGNS)}")
    if count is not None and hours is not None:
        raise ValueError("give COUNT or HOURS, not both")
    if count is not None and count < 1:
        raise ValueError(f"COUNT={count}: at least 1")
    if hours is not None and not hours > 0:
        raise ValueError(f"HOURS={hours}: must be more than 0")
    campaign = CAMPAIGNS[name]
    per_seed = per_seed or campaign.per_seed
    if per_seed < 1:
        raise ValueError(f"per_seed={per_seed}: at least 1")
    base = fresh_base_seed() if base_seed is None else int(base_seed)
    index, total = shard
    report = CampaignReport(name, campaign.unit, base, f"{index}/{total}")
    if hours is None:
        todo = shard_chunks(chunks(base, name, count or campaign.target, per_seed), index, total)
        report.seeds = [c.seed for c in todo]
        say(f"soak {name}: base seed {base}, shard {index}/{total}: {len(todo)} seeds of "
            f"≤ {per_seed} {campaign.unit} ({sum(c.attempts for c in todo)} {campaign.unit}): "
            f"{' '.join(map(str, report.seeds))}")
        plan = iter(todo)
        deadline = None
    else:
        say(f"soak {name}: base seed {base}, shard {index}/{total}: {hours} h of seeds of "
            f"{per_seed} {campaign.unit} (each seed printed with its result)")
        plan = endless_chunks(base, name, per_seed, index, total)
        deadline = time.monotonic() + hours * 3600
    run = runner or (lambda c: _run_chunk(campaign, c))
    start = time.monotonic()
    for chunk in plan:
        if deadline is not None:
            if time.monotonic() >= deadline:
                break
            report.seeds.append(chunk.seed)
        result = run(chunk)
        why = "" if result.passed else f": {(result.message or 'no message').splitlines()[0][:300]}"
        say(f"  seed {chunk.seed}: {'pass' if result.passed else 'FAIL'} — {result.attempts} "
            f"{campaign.unit}, {result.accepted} accepted, {result.lost} lost, {result.cycles} cycles, "
            f"{result.seconds:.1f} s ({result.sim_seconds:.1f} s simulating){why}")
        if not result.passed and runner is None:
            _save_failure(campaign, chunk, result, waves_on_failure)
        report.add(result)
    report.close(time.monotonic() - start)
    say(verdict_line(report))
    return report


def write_report(reports, shard, path=None):
    """The JSON report of *reports* (CampaignReports): ``soak.json``, or ``soak-<i>of<N>.json``
    for shard i of N > 1."""
    index, total = shard
    path = Path(path) if path else REPORTS / ("soak.json" if total == 1 else f"soak-{index}of{total}.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"shard": f"{index}/{total}", "campaigns": [asdict(r) for r in reports]},
                               indent=1))
    return path


def _rerun(names, args):
    """``--rerun SEED``: one chunk of one campaign with that seed, waves into its folder."""
    if len(names) != 1:
        raise ValueError("RERUN=<seed> needs one campaign (CAMPAIGN=<name>)")
    campaign = CAMPAIGNS[names[0]]
    chunk = Chunk(0, args.rerun, args.count or args.per_seed or campaign.per_seed)
    folder = None if args.no_waves else SOAK_DIR / campaign.name / str(chunk.seed)
    result = _run_chunk(campaign, chunk, waves_dir=folder)
    print(f"soak {campaign.name} seed {chunk.seed}: {'PASS' if result.passed else 'FAIL'} — {result.attempts} "
          f"{campaign.unit}, {result.accepted} accepted, {result.lost} lost, {result.cycles} cycles, "
          f"{result.seconds:.1f} s{'; waves ' + result.waves if result.waves else ''}"
          + ("" if result.passed else f"\n{result.message}"))
    return 0 if result.passed else 1


def main(argv=None):
    ap = argparse.ArgumentParser(prog="make soak", description=__doc__.split("\n\n")[0])
    ap.add_argument("campaigns", nargs="*", metavar="CAMPAIGN",
                    help=f"campaigns to run (default all): {', '.join(CAMPAIGNS)}")
    ap.add_argument("--count", type=int, help="attempts per campaign (default: its target)")
    ap.add_argument("--hours", type=float, help="run each campaign for this long instead")
    ap.add_argument("--shard", default="1/1", help="shard i/N: chunks k with k mod N = i - 1")
    ap.add_argument("--seed", type=int, help="base seed (default: fresh)")
    ap.add_argument("--per-seed", type=int, help="attempts per chunk (default: the campaign's)")
    ap.add_argument("--no-waves", action="store_true", help="do not rerun a failing seed with waves")
    ap.add_argument("--rerun", type=int, metavar="SEED",
                    help="run one chunk of one campaign with this seed (--count attempts), with waves")
    ap.add_argument("--report", help="JSON report path (default sim_build/reports/soak[-<i>of<N>].json)")
    args = ap.parse_args(argv)
    try:
        shard = parse_shard(args.shard)
        names = [n for a in args.campaigns for n in a.split(",") if n] or list(CAMPAIGNS)
        unknown = [n for n in names if n not in CAMPAIGNS]
        if unknown:
            raise ValueError(f"no soak campaign {', '.join(map(repr, unknown))}; campaigns: {', '.join(CAMPAIGNS)}")
        if args.count is not None and args.hours is not None:
            raise ValueError("give COUNT or HOURS, not both")
        if args.rerun is not None:
            return _rerun(names, args)
        base = fresh_base_seed() if args.seed is None else args.seed
        reports = []
        for name in names:
            reports.append(run_campaign(name, args.count, args.hours, shard, base, args.per_seed,
                                        waves_on_failure=not args.no_waves))
    except ValueError as e:
        print(f"make soak: {e}", file=sys.stderr)
        return 2
    path = write_report(reports, shard, args.report)
    print(f"soak report: {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
    for r in reports:
        print(verdict_line(r))
    return 0 if all(r.verdict == "PASS" for r in reports) else 1


if __name__ == "__main__":
    sys.exit(main())
