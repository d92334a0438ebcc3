"""Benchmark of the SPDM model (host Python, no simulator): one session between the CVM
driver's requester and the GPU firmware's responder in H100's order (negotiation,
certificates, KEY_EXCHANGE, FINISH, GET_MEASUREMENTS), at SPDM 1.1 and 1.2: requests,
bytes on the wire, the signed report's size, and the wall time of the whole session
(median of RUNS, milliseconds). Run by ``make bench`` (scripts/bench.py calls
:func:`bench`)."""
import statistics
import time

from sw.spdm.identity import Manufacturer
from sw.spdm.messages import V11, V12
from sw.spdm.requester import Requester
from sw.spdm.responder import Responder

__all__ = ["bench"]

RUNS = 7


def bench() -> dict:
    manufacturer = Manufacturer()
    device = manufacturer.issue_device(0x4100_0002)
    slots = [bytes([i]) * 48 for i in range(64)]
    out = {}
    for name, version in (("v11", V11), ("v12", V12)):
        times, result = [], None
        for _ in range(RUNS):
            responder = Responder(device, lambda: slots)
            t = time.perf_counter()
            result = Requester(responder.handle, manufacturer.root, versions=(version,)).run(h100_order=True)
            times.append((time.perf_counter() - t) * 1e3)
        out[f"spdm_{name}"] = {"requests": result.messages, "bytes_exchanged": result.bytes_exchanged,
                               "report_bytes": len(result.report_response),
                               "session_ms": round(statistics.median(times), 2)}
    return out


if __name__ == "__main__":
    print(bench())
