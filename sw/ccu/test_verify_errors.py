"""A relying party rejects bad evidence with the specific error, naming the mismatch."""
import dataclasses

import pytest
from cryptography.hazmat.primitives import serialization

from sw.ccu import (
    ChainError,
    EpochMismatchError,
    FingerprintMissingError,
    MalformedReportError,
    ManifestMismatchError,
    ManufacturerCA,
    MeasurementMismatchError,
    RelyingParty,
    ReportSignatureError,
)
from sw.ccu.testing import MODEL, certificates, firmware, make_device, make_identities, make_manifest

DER = serialization.Encoding.DER


def evidence_of(device, manifest, identities):
    device.cce.create_tee(manifest, certificates(identities))
    return device.cce.get_attestation_report()


@pytest.fixture
def evidence(created):
    return created.cce.get_attestation_report()


def test_good_evidence_verifies(evidence, parties):
    for p in parties.values():
        p.verify(evidence)


def test_wrong_bootloader(ca, manifest, identities, parties, device):
    """A validly signed but unexpected secondary bootloader: other PIK and AK, and the
    verifier says which measurement is wrong."""
    good = device.certificates
    device.flash_firmware(firmware(ca, sbl=b"secondary bootloader v0 (old)"))
    device.reset()
    ev = evidence_of(device, manifest, identities)
    assert device.certificates.pik_certificate.public_key() != good.pik_certificate.public_key()
    assert device.certificates.ak_certificate.public_key() != good.ak_certificate.public_key()
    with pytest.raises(MeasurementMismatchError,
                       match="secondary-bootloader measurement in the PIK certificate"):
        parties[MODEL].verify(ev)


def test_wrong_cce(ca, manifest, identities, parties, device):
    dev = make_device(ca, firmware(ca, cce=b"cce v1 with a backdoor"))
    mine, theirs = device.certificates, dev.certificates
    assert theirs.pik_certificate.public_key() == mine.pik_certificate.public_key()
    assert theirs.ak_certificate.public_key() != mine.ak_certificate.public_key()
    with pytest.raises(MeasurementMismatchError, match="cce measurement in the AK"):
        parties[MODEL].verify(evidence_of(dev, manifest, identities))


def test_wrong_icu_firmware(ca, manifest, identities, parties):
    dev = make_device(ca, firmware(ca, icu=b"icu firmware v2"))
    with pytest.raises(MeasurementMismatchError, match="icu-firmware measurement"):
        parties[MODEL].verify(evidence_of(dev, manifest, identities))


def test_wrong_tile_bootloader_slot(ca, manifest, identities, parties):
    dev = make_device(ca, firmware(ca, tile_bootloader=b"tile bootloader that leaks"))
    with pytest.raises(MeasurementMismatchError, match=r"slot 4 \(tile-bootloader\)"):
        parties[MODEL].verify(evidence_of(dev, manifest, identities))


@pytest.mark.parametrize("offset", [0, 5, 20, 40, 80, 82 + 48 * 3 + 7, 82 + 48 * 64 + 3,
                                    -100, -97, -50, -1])
def test_tampered_report(evidence, parties, offset):
    blob = bytearray(evidence.report)
    blob[offset] ^= 0x01
    party = parties[MODEL]
    with pytest.raises(ReportSignatureError, match="signature does not verify"):
        party.verify(dataclasses.replace(evidence, report=bytes(blob)))
    assert party.counter == 0


def test_truncated_report(evidence, parties):
    with pytest.raises(MalformedReportError, match="too short"):
        parties[MODEL].verify(dataclasses.replace(evidence, report=evidence.report[:90]))
    with pytest.raises(ReportSignatureError):
        parties[MODEL].verify(dataclasses.replace(evidence, report=evidence.report[:-1]))


def test_wrong_chain(ca, bundle, evidence, parties, manifest, identities):
    other = make_device(ca, bundle, uds=bytes(48))       # another card, same firmware
    theirs = evidence_of(other, manifest, identities).certificates
    cik, pik, ak = evidence.certificates
    party = parties[MODEL]
    cases = [((theirs[0], pik, ak), "PIK certificate ← CIK"),
             ((cik, theirs[1], ak), "PIK certificate ← CIK"),
             ((cik, pik, theirs[2]), "AK certificate ← PIK"),
             ((cik, ak, pik), "issuer is not a CA|PIK certificate ← CIK"),
             ((cik, pik), "expected CIK, PIK and AK"),
             ((ManufacturerCA().certificate.public_bytes(DER), pik, ak),
              "CIK certificate ← manufacturer CA")]
    for chain, message in cases:
        with pytest.raises(ChainError, match=message):
            party.verify(dataclasses.replace(evidence, certificates=chain))
    # A CIK certificate for that card from another CA, with its own genuine report:
    rogue = ManufacturerCA().issue_cik_certificate(other.certificates.cik_csr)
    theirs_ev = other.cce.get_attestation_report()
    party.verify(theirs_ev)                       # genuine: verifies
    with pytest.raises(ChainError, match="CIK certificate ← manufacturer CA"):
        party.verify(dataclasses.replace(
            theirs_ev, certificates=(rogue.public_bytes(DER),) + theirs[1:]))


def test_reference_from_another_ca(ca, bundle, evidence, identities, manifest):
    key, cert = identities[MODEL]
    forged = ManufacturerCA().reference_certificate(bundle)
    party = RelyingParty(MODEL, key, cert, ca.certificate, forged, manifest)
    with pytest.raises(ChainError, match="reference certificate is not signed"):
        party.verify(evidence)


def test_other_manifest(ca, reference, evidence, identities, manifest):
    key, cert = identities[MODEL]
    for other, message in ((make_manifest(identities, job_id=b"job-0002-abcdefg"),
                            "report is for job"),
                           (dataclasses.replace(manifest, binary_measurement=bytes(48)),
                            "manifest hash")):
        party = RelyingParty(MODEL, key, cert, ca.certificate, reference, other)
        with pytest.raises(ManifestMismatchError, match=message):
            party.verify(evidence)


def test_party_not_in_report(ca, reference, evidence, manifest):
    key, cert = make_identities(MODEL)[MODEL]        # a stranger calling itself MODEL
    party = RelyingParty(MODEL, key, cert, ca.certificate, reference, manifest)
    with pytest.raises(FingerprintMissingError, match="party 1's certificate"):
        party.verify(evidence)


def test_unexpected_epoch(evidence, parties):
    with pytest.raises(EpochMismatchError, match="report has epoch 0, checkpoint 0; agreed "
                                                 "epoch 1, checkpoint 4"):
        parties[MODEL].verify(evidence, epoch=1, checkpoint_id=4)
