"""Benchmark of the CCU firmware model (host Python, no simulator): wall time of measured
boot, creating a TEE with its signed report, one party's verification of the evidence,
and the CCU unwrapping one key package. Median of RUNS runs, in milliseconds. Run by
``make bench`` (scripts/bench.py calls :func:`bench`)."""
import statistics
import time

from sw.ccu.testing import (
    MODEL,
    ManufacturerCA,
    certificates,
    firmware,
    make_device,
    make_identities,
    make_manifest,
    make_parties,
    make_party_keys,
)

__all__ = ["bench"]

RUNS = 7


def _timed(fn):
    t = time.perf_counter()
    out = fn()
    return out, (time.perf_counter() - t) * 1e3


def bench() -> dict:
    ca = ManufacturerCA()
    bundle = firmware(ca)
    identities = make_identities()
    manifest = make_manifest(identities)
    parties = make_parties(ca, ca.reference_certificate(bundle), identities, manifest)
    keys = make_party_keys()
    device = make_device(ca, bundle)
    times = {"boot_ms": [], "report_ms": [], "verify_ms": [], "unwrap_ms": []}
    for _ in range(RUNS):
        cce, t_boot = _timed(device.reset)      # chip reset + PBL → SBL → CCE
        evidence, t_report = _timed(lambda: (cce.create_tee(manifest, certificates(identities)),
                                             cce.get_attestation_report())[1])
        party = parties[MODEL]
        verified, t_verify = _timed(lambda: party.verify(evidence))
        package = party.wrap_keys(verified, keys[MODEL])
        _, t_unwrap = _timed(lambda: cce.submit_key_package(package))
        for name, t in zip(times, (t_boot, t_report, t_verify, t_unwrap)):
            times[name].append(t)
    return {"ccu": {name: round(statistics.median(v), 3) for name, v in times.items()}}


if __name__ == "__main__":
    print(bench())
