"""Our verifier on NVIDIA's own evidence: the H100 report, certificate chain, roots and
RIMs shipped in ``nv-local-gpu-verifier`` 2.7.3 (the ``make nvenv`` venv; skipped without it).

What NVIDIA's ``--test_no_gpu`` mode uses (``verifier/config.py`` ``HopperSettings``,
``verifier/cc_admin.py``): the report ``samples/hopperAttestationReport.txt``, the chain
``samples/hopperCertChain.txt``, the driver RIM ``TEST_NO_GPU_DRIVER_RIM_PATH`` =
``samples/Driver_RIM_test_no_gpu.swidtag`` and the VBIOS RIM ``TEST_NO_GPU_VBIOS_RIM_PATH``
= ``samples/1010_0200_882_96005E0001_test_no_gpu.swidtag``, compared by
``verifier.verifier.Verifier``.

What holds for these files, and what the tests pin:

- the report parses (SPDM 1.1, 64 blocks), the chain checks to ``certs/verifier_device_root.pem``,
  the leaf's FWID equals the report's, and the report's signature verifies (SPDM 1.1 rule);
- both RIMs' XML signatures verify to ``certs/verifier_RIM_root.pem`` at a time inside
  every RIM certificate's validity (the RIM signer certificate ``HCC RIM L4 Signer`` is
  valid 2023-06-27 … 2025-06-26, so the check runs at :data:`AT`);
- the sample RIMs are not the RIMs of this report: the report says driver 550.90.07,
  VBIOS 96.00.9f.00.01; the RIMs say 545.00 and 96.00.5E.00.01, and 20 of their active
  indices do not match. NVIDIA's own ``Verifier`` finds the same 20 indices (the test runs
  it in the nvenv and compares), so the baseline verdict of the sample evidence has
  exactly the failures ``driver_version``, ``vbios_version``, ``measurements``, and every
  other check passes;
- OCSP is off: NVIDIA's OCSP service is not reachable here (NVIDIA's verifier itself
  stops at "OCSP request failed" in this mode offline); the OCSP check runs on our chains
  (test_ocsp.py, test_verifier.py);
- the report's request nonce is ``931d8dd0…``; NVIDIA's test-mode nonce
  (``BaseSettings.NONCE`` = ``4cff7f53…``) is another, and our verifier says so;
- tampering: changing any byte of the report, the chain or either RIM adds a failure to
  the baseline or raises the documented input error (sweeps below);
- the other direction: NVIDIA's RIM code reads our RIMs (schema, measurements) and
  signxml verifies their signatures to our RIM root.
"""
import datetime
import json
import os
import pathlib
import subprocess

import pytest
from cryptography import x509

from sw.attest.errors import AttestError
from sw.attest.rim import parse_rim, verify_rim_signature
from sw.attest.verifier import Policy, parse_report, verify

ROOT = pathlib.Path(__file__).resolve().parents[2]
NVENV = ROOT / "sim_build" / "nvenv"
PKG = NVENV / "lib" / "python3.11" / "site-packages" / "verifier"
SAMPLES = PKG / "samples"
AT = datetime.datetime(2024, 6, 1, tzinfo=datetime.timezone.utc)
NVIDIA_TEST_NONCE = bytes.fromhex("4cff7f5380ead8fad8ec2c531c110aca4302a88f603792801a8ca29ee151af2e")
# NVIDIA's Verifier on these files (pinned here, and recomputed by test_nvidia_verifier_agrees)
MISMATCHED = [1, 2, 3, 7, 9, 11, 21, 22, 25, 26, 27, 29, 30, 31, 32, 34, 36, 37, 39, 40]
BASELINE = {"driver_version", "vbios_version", "measurements"}

pytestmark = pytest.mark.skipif(not (SAMPLES / "hopperAttestationReport.txt").exists(),
                                reason="NVIDIA's verifier venv (with its samples) is absent: make nvenv")


class Sample:
    def __init__(self):
        self.report = bytes.fromhex((SAMPLES / "hopperAttestationReport.txt").read_text().strip())
        self.chain = (SAMPLES / "hopperCertChain.txt").read_bytes()
        self.driver_rim = (SAMPLES / "Driver_RIM_test_no_gpu.swidtag").read_bytes()
        self.vbios_rim = (SAMPLES / "1010_0200_882_96005E0001_test_no_gpu.swidtag").read_bytes()
        self.device_root = x509.load_pem_x509_certificate((PKG / "certs" / "verifier_device_root.pem").read_bytes())
        self.rim_root = x509.load_pem_x509_certificate((PKG / "certs" / "verifier_RIM_root.pem").read_bytes())
        self.nonce = self.report[4:36]
        self.policy = Policy(self.device_root, self.rim_root, ocsp=None, ocsp_leaf=False, at=AT,
                             require_cc_mode=False)

    def verify(self, report=None, chain=None, driver_rim=None, vbios_rim=None, nonce=None):
        return verify(report if report is not None else self.report, chain if chain is not None else self.chain,
                      driver_rim if driver_rim is not None else self.driver_rim,
                      vbios_rim if vbios_rim is not None else self.vbios_rim,
                      nonce=nonce if nonce is not None else self.nonce, policy=self.policy)


@pytest.fixture(scope="module")
def sample():
    return Sample()


def test_sample_report_parses(sample):
    report = parse_report(sample.report)
    assert report.version == 0x11 and len(report.measurements) == 64 and len(report.response.signature) == 96
    assert report.request.nonce.hex().startswith("931d8dd0")


def test_baseline_verdict(sample):
    verdict = sample.verify()
    c = verdict.claims
    assert c["chain"] and c["report_signature"] and c["nonce_match"]
    assert c["driver_rim_signature"] and c["vbios_rim_signature"]
    assert c["fwid_in_certificate"].startswith("f5c384ae")  # equal to the report's FWID: no "fwid" failure
    assert c["hwmodel"] == "GH100 A01 GSP BROM"
    assert (c["driver_version"], c["vbios_version"]) == ("550.90.07", "96.00.9f.00.01")
    assert (c["driver_rim_version"], c["vbios_rim_version"]) == ("545.00", "96.00.5E.00.01")
    assert c["device_ocsp"] == "off" and (c["cc_mode"], c["devtools"]) == ("unknown", None)
    assert verdict.names == BASELINE
    assert c["mismatched_indices"] == MISMATCHED


def test_nvidia_test_mode_nonce_is_not_the_reports(sample):
    assert "nonce" in sample.verify(nonce=NVIDIA_TEST_NONCE).names


def test_rim_signatures_at_a_time_the_signer_was_valid(sample):
    for data in (sample.driver_rim, sample.vbios_rim):
        chain = verify_rim_signature(data, sample.rim_root, at=AT)
        assert [c.subject.rfc4514_string() for c in chain][0].startswith("CN=HCC RIM L4 Signer")
        with pytest.raises(AttestError, match="not valid at"):
            verify_rim_signature(data, sample.rim_root, at=datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc))
    with pytest.raises(AttestError):  # the device root is not the RIM root
        verify_rim_signature(sample.driver_rim, sample.device_root, at=AT)


def nvenv_run(script_name, tmp_path, *args):
    """Run one of this folder's NVIDIA-side scripts in the nvenv; its last JSON line."""
    script = pathlib.Path(__file__).with_name(script_name)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    out = subprocess.run([str(NVENV / "bin" / "python"), "-c", script.read_text(), *map(str, args)],
                         capture_output=True, text=True, timeout=180, env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_nvidia_verifier_agrees(sample, tmp_path):
    """NVIDIA's own ``Verifier`` (run in its venv) finds the same mismatched indices."""
    result = nvenv_run("nvidia_compare.py", tmp_path)
    assert result["ok"] is False
    assert result["mismatched"] == MISMATCHED == sample.verify().claims["mismatched_indices"]
    assert result["nonce"] == sample.nonce.hex()


def test_nvidia_reads_our_rims(tmp_path):
    """The other direction: NVIDIA's RIM class parses our RIM and validates it against the
    SWID schema, and signxml (what NVIDIA's RIM.verify_signature calls) verifies our
    signature to our RIM root; a RIM edited after signing is refused by signxml too."""
    from cryptography.hazmat.primitives import serialization

    from sw.attest.testbed import Env
    env = Env()
    (tmp_path / "root.pem").write_bytes(env.rim_authority.root.public_bytes(serialization.Encoding.PEM))
    (tmp_path / "driver.swidtag").write_bytes(env.driver_rim)
    result = nvenv_run("nvidia_rim.py", tmp_path, tmp_path / "driver.swidtag", tmp_path / "root.pem")
    golden = env.firmware.golden("driver")
    assert result["schema"] is True and result["version"] == "550.90.07" and result["signature"] == "ok"
    assert result["active"] == {str(i): [v.hex() for v in values] for i, values in golden.items()}
    edited = env.driver_rim.replace(golden[7][0].hex().encode(), b"00" * 48)
    (tmp_path / "edited.swidtag").write_bytes(edited)
    assert nvenv_run("nvidia_rim.py", tmp_path, tmp_path / "edited.swidtag", tmp_path / "root.pem")["signature"] != "ok"


# --- tamper sweeps ---------------------------------------------------------------------------

def _rejected(run):
    """True when *run* raises the documented error or adds a failure to the baseline."""
    try:
        verdict = run()
    except AttestError:
        return True
    return bool(verdict.names - BASELINE)


def _flip(data, pos):
    out = bytearray(data)
    out[pos] ^= 0x01
    return bytes(out)


def _positions(size, step, extra=()):
    return sorted(set(range(0, size, step)) | set(extra))


def test_every_report_byte_is_covered(sample):
    """Every 97th byte plus all 96 signature bytes: the signature (SPDM 1.1: over request ‖
    response) covers every other byte, so no region is excluded."""
    n = len(sample.report)
    positions = _positions(n, 97, range(n - 96, n))
    assert len(positions) > 120
    bad = [p for p in positions if not _rejected(lambda p=p: sample.verify(report=_flip(sample.report, p)))]
    assert bad == []


def test_every_chain_byte_is_covered(sample):
    """Every 61st byte of the PEM chain (~80 positions over all five certificates): a
    changed base64 character changes a DER byte under a signature (or the trusted root);
    PEM armour and line ends must be canonical (certs.load_pem_chain), so none is excluded."""
    positions = _positions(len(sample.chain), 61, (0, 27, 28, len(sample.chain) - 1))
    bad = [p for p in positions if not _rejected(lambda p=p: sample.verify(chain=_flip(sample.chain, p)))]
    assert bad == []


def _signature_value_span(data):
    start = data.index(b"<ds:SignatureValue>") + len(b"<ds:SignatureValue>")
    return range(start, data.index(b"</ds:SignatureValue>"))


@pytest.mark.parametrize("which", ["driver_rim", "vbios_rim"])
def test_every_rim_byte_is_covered(sample, which):
    """Every 487th byte of the RIM (~42 positions: payload, Meta, SignedInfo, KeyInfo
    certificates) plus every third byte of SignatureValue's base64 (43). The digest covers the document without
    the Signature, the signature covers SignedInfo, the chain check covers the KeyInfo
    certificates, and base64 must be canonical; XML markup changes break the parse. No
    region of NVIDIA's RIMs is excluded (the whole-file sweep in docs/attestation.md found none)."""
    data = getattr(sample, which)
    positions = _positions(len(data), 487, _signature_value_span(data)[::3])
    bad = [p for p in positions if not _rejected(lambda p=p: sample.verify(**{which: _flip(data, p)}))]
    assert bad == []


def test_rim_parse_reads_nvidia_layout(sample):
    rim = parse_rim(sample.vbios_rim)
    assert rim.product == "GH100" and len(rim.measurements) == 64
    assert sorted(rim.active()) == [0, 1, 2, 3, 4, 5, 6, 8, 9, 10, 11, 12]
    assert len(rim.measurements[12].alternatives) == 4
