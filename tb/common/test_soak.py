"""A slice of each soak campaign (scripts/soak.py, ``make soak``), part of ``make sim``: so
that the campaigns cannot rot, and so that every regression run sends fresh random attacks,
frames and warps beside its directed tests — on the regression's own Verilator builds,
through the driver (seed list, chunk run, tallies, verdict). The ``gcm`` and ``bcu`` slices
are sized to about ten seconds of simulation each; ``sxp_system``'s, the most cycles per
second and the attacks the regression is for, to about fifty (1,400 attacks, ≈ 600 k
cycles: it brings ``make sim`` to over 3× the 446 k cycles of issue 17's baseline).
``SEED=n`` fixes the base seed; without it every run draws a fresh one (printed)."""
import os

import pytest

from scripts.soak import run_campaign

SMOKE = {"sxp_system": 1400, "gcm": 1200, "bcu": 40_000}


@pytest.mark.parametrize("campaign", list(SMOKE))
def test_soak_smoke(campaign):
    count = SMOKE[campaign]
    base = int(os.environ["SEED"]) if os.environ.get("SEED") else None
    report = run_campaign(campaign, count=count, base_seed=base, per_seed=count, waves_on_failure=False)
    (chunk,) = report.chunks
    assert report.verdict == "PASS", f"{campaign} (base seed {report.base_seed}): {chunk['message'][:2000]}"
    assert report.attempts == count and report.cycles > 0, f"{campaign}: {report.attempts} of {count} attempts"
    detail = chunk["detail"]
    if campaign == "sxp_system":
        assert detail["caught_by_sxp"] + detail["caught_by_iv_check"] == count, detail
        assert detail["good_frames"] > 0, f"no good frame landed around the attacks: {detail}"
    elif campaign == "gcm":
        assert detail["decrypt"] and detail["forged"], f"no decrypt or no forged frame in {count}: {detail}"
    else:
        assert detail["violation"] and detail["refused"] >= detail["violation"], detail
