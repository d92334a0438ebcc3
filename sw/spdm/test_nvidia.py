"""NVIDIA's own parser reads the reports this RTR produces.

``nv-local-gpu-verifier`` (BSD-3) pins ``cryptography==43.0.1``, so it lives in its own
virtual environment (``make nvenv``, which ``make unit`` and so ``make test`` run: the
pinned versions are in ``sw/spdm/nvidia-requirements.txt``), and the test runs it in a
subprocess. Without that venv the tests skip. What they check: ``verifier.attestation.AttestationReport``
(NVIDIA's SPDM GET_MEASUREMENTS / MEASUREMENTS parser, with ``HopperSettings``) parses the
report of an SPDM 1.1 session (H100's version) field for field as we built it — version,
codes, the 64 measurement values, nonce, opaque fields (driver and VBIOS version,
measurement counts), signature — and its ``verify_signature`` accepts the signature under
our attestation certificate. For an SPDM 1.2 report the parse still matches but NVIDIA's
signature check fails: it verifies the 1.1 rule (ECDSA over request || response without
the signature), while 1.2 signs the prefixed hash of VCA || L1.
"""
import json
import os
import pathlib
import subprocess

import pytest
from cryptography.hazmat.primitives import serialization

from sw.spdm.conftest import rts_values
from sw.spdm.messages import V11, V12
from sw.spdm.opaque import OpaqueField, decode_opaque
from sw.spdm.requester import Requester
from sw.spdm.responder import Responder

NVENV = pathlib.Path(__file__).resolve().parents[2] / "sim_build" / "nvenv" / "bin" / "python"

NVIDIA_SCRIPT = r"""
import hashlib, json, sys
from cryptography import x509
from verifier.attestation import AttestationReport
from verifier.config import HopperSettings
report = bytes.fromhex(open(sys.argv[1]).read())
leaf = x509.load_pem_x509_certificate(open(sys.argv[2], "rb").read())
r = AttestationReport(report, HopperSettings())
m = r.get_response_message()
o = m.get_opaque_data()
print(json.dumps({
    "request_version": r.get_request_message().get_spdm_version().hex(),
    "request_nonce": r.get_request_message().get_nonce().hex(),
    "version": m.get_spdm_version().hex(), "code": m.get_request_response_code().hex(),
    "blocks": m.get_number_of_blocks(), "measurements": r.get_measurements(),
    "nonce": m.get_nonce().hex(), "signature": m.get_signature().hex(),
    "driver": o.get_data("OPAQUE_FIELD_ID_DRIVER_VERSION").hex(),
    "vbios": o.get_data("OPAQUE_FIELD_ID_VBIOS_VERSION").hex(),
    "msrscnt": o.get_data("OPAQUE_FIELD_ID_MSRSCNT"),
    "fwid": o.get_data("OPAQUE_FIELD_ID_FWID").hex(),
    "signature_ok": bool(r.verify_signature(leaf, HopperSettings.signature_length, hashlib.sha384)),
}))
"""

pytestmark = pytest.mark.skipif(not NVENV.exists(), reason="NVIDIA's verifier venv is absent: make nvenv")


def nvidia_parse(tmp_path, report, leaf):
    (tmp_path / "report.hex").write_text(report.hex())
    (tmp_path / "leaf.pem").write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    out = subprocess.run([str(NVENV), "-c", NVIDIA_SCRIPT, str(tmp_path / "report.hex"), str(tmp_path / "leaf.pem")],
                         capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("h100_order", [False, True], ids=["challenge-first", "h100-order"])
@pytest.mark.parametrize("version", [V11, V12], ids=["1.1", "1.2"])
def test_nvidia_parser_reads_our_report(device, manufacturer, tmp_path, version, h100_order):
    values = rts_values(b"nvidia")
    counts = [i % 5 for i in range(64)]
    result = Requester(Responder(device, lambda: values, extend_counts=lambda: counts).handle, manufacturer.root,
                       versions=(version,)).run(h100_order=h100_order)
    report = result.report_request + result.report_response
    parsed = nvidia_parse(tmp_path, report, device.leaf)
    ours = dict(decode_opaque(result.opaque))
    assert parsed["request_version"] == parsed["version"] == f"{version:02x}"
    assert parsed["code"] == "60" and parsed["blocks"] == 64
    assert parsed["request_nonce"] == result.report_request[4:36].hex()
    assert parsed["measurements"] == [v.hex() for v in values]
    assert parsed["nonce"] == result.report_response[8 + 64 * 55:8 + 64 * 55 + 32].hex()
    assert parsed["signature"] == result.report_response[-96:].hex()
    assert parsed["driver"] == ours[OpaqueField.DRIVER_VERSION].hex()
    assert parsed["vbios"] == ours[OpaqueField.VBIOS_VERSION].hex()
    assert parsed["msrscnt"] == counts
    assert parsed["fwid"] == ours[OpaqueField.FWID].hex()
    assert parsed["signature_ok"] is (version == V11)


def test_nvidia_rejects_tampered_report(device, manufacturer, tmp_path):
    """Control: a measurement byte changed after signing, NVIDIA's check fails."""
    result = Requester(Responder(device, rts_values).handle, manufacturer.root, versions=(V11,)).run()
    report = bytearray(result.report_request + result.report_response)
    report[37 + 8 + 7] ^= 1
    assert nvidia_parse(tmp_path, bytes(report), device.leaf)["signature_ok"] is False
