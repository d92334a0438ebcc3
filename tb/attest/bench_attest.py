"""Benchmark of the local verifier (host Python): wall time of one :func:`sw.attest.verifier.verify`
(median of RUNS, host-timed milliseconds) on our own evidence (SPDM 1.1 session in H100's
order, our RIMs, OCSP on: one round trip to the in-process responder per certificate below a
root) and on NVIDIA's
sample evidence (OCSP off, see test_nvidia_evidence.py), with the report, chain and RIM
sizes in bytes. ``python -m tb.attest.bench_attest`` (and ``make bench``) prints the table and writes
``sim_build/reports/attest.json``; :func:`bench` returns ``{entry: figures}`` in the shape
``scripts/bench.py`` collects."""
import json
import pathlib
import statistics
import time

from sw.attest.testbed import Env
from sw.attest.verifier import verify

__all__ = ["bench"]

RUNS = 7
ROOT = pathlib.Path(__file__).resolve().parents[2]


def _time(fn):
    times = []
    for _ in range(RUNS):
        t = time.perf_counter()
        verdict = fn()
        times.append((time.perf_counter() - t) * 1e3)
    return verdict, round(statistics.median(times), 2)


def bench() -> dict:
    env = Env()
    report, chain, nonce, _, _ = env.session()
    policy = env.policy()
    before = env.ocsp.requests
    verify(report, chain, env.driver_rim, env.vbios_rim, nonce=nonce, policy=policy)
    ocsp_requests = env.ocsp.requests - before
    verdict, ms = _time(lambda: verify(report, chain, env.driver_rim, env.vbios_rim, nonce=nonce, policy=policy))
    assert verdict.ok, verdict.failures
    _, ms_off = _time(lambda: verify(report, chain, env.driver_rim, env.vbios_rim, nonce=nonce,
                                     policy=env.policy(ocsp=None)))
    out = {"attest_ours": {"verify_ms": ms, "verify_ms_ocsp_off": ms_off, "report_bytes": len(report),
                           "chain_bytes": len(chain), "driver_rim_bytes": len(env.driver_rim),
                           "vbios_rim_bytes": len(env.vbios_rim), "ocsp_requests_per_verify": ocsp_requests}}
    from sw.attest.test_nvidia_evidence import BASELINE, SAMPLES, Sample
    if (SAMPLES / "hopperAttestationReport.txt").exists():
        sample = Sample()
        verdict, ms = _time(sample.verify)
        assert verdict.names == BASELINE, verdict.failures
        out["attest_nvidia_sample"] = {"verify_ms_ocsp_off": ms, "report_bytes": len(sample.report),
                                       "chain_pem_bytes": len(sample.chain),
                                       "driver_rim_bytes": len(sample.driver_rim),
                                       "vbios_rim_bytes": len(sample.vbios_rim)}
    return out


def main():
    results = bench()
    for name, figures in results.items():
        print(name)
        width = max(map(len, figures))
        for key, value in figures.items():
            print(f"  {key:<{width}}  {value}")
    out = ROOT / "sim_build" / "reports" / "attest.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1))
    print(f"written: {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
