"""Relying party (model or data provider): verify the CCU's evidence, wrap key packages.

:meth:`RelyingParty.verify` checks, in this order (each failure its own exception):

1. the reference certificate is the CA's (ChainError);
2. CA → CIK → PIK → AK: each certificate is directly issued by the previous one, whose
   basic constraints allow it to sign certificates (ChainError naming the link);
3. PIK measurements (secondary bootloader, ICU firmware) and AK measurement (CCE) equal
   the references (MeasurementMismatchError naming component and both values);
4. the report's signature under the AK (ReportSignatureError), then its encoding;
5. report slots equal the values the references imply, unused slots are zero
   (MeasurementMismatchError naming the slot; slot 3 says so when the CCU read the SXP's
   trusted-mode bit as clear);
6. job id and manifest hash are the party's manifest (ManifestMismatchError), the
   fingerprints are the manifest's and include the party's own (FingerprintMissingError);
7. epoch counter and checkpoint id are what the party agreed to (EpochMismatchError).

Malformed evidence raises from the same hierarchy (:mod:`sw.ccu.errors`), never a library
error: a certificate that is neither DER bytes of an X.509 certificate nor an
``x509.Certificate``, or a certificate list that is not a sequence of three, is a
ChainError; report bytes that are not bytes, too short or do not parse, or whose ECDH key
is not a P-384 point, are a MalformedReportError.
"""
import os
from dataclasses import dataclass

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric import ec

from . import certs
from .ca import reference_measurements
from .errors import (
    ChainError,
    EpochMismatchError,
    FingerprintMissingError,
    MalformedReportError,
    ManifestMismatchError,
    MeasurementMismatchError,
)
from .firmware import CCE, SBL
from .keypkg import NONCE_SIZE, KeyPackageContents, seal_package
from .manifest import JobManifest
from .measure import (
    DIGEST_SIZE,
    SLOT_CC_MODE,
    SLOT_CCE,
    SLOT_CONFIG,
    SLOT_ICU,
    SLOT_NAMES,
    SLOT_SBL,
    SLOT_TILE_BOOTLOADER,
    cc_mode_measurement,
    config_measurement,
    extend_value,
)
from .report import AttestationReport, report_hash, split_signed_report, verify_report_signature

__all__ = ["RelyingParty", "VerifiedReport", "make_party_identity", "expected_slots"]

_UNTRUSTED_CONFIG = extend_value(bytes(DIGEST_SIZE), config_measurement(False))
_SLOT_REFERENCE = {SLOT_SBL: SBL, SLOT_ICU: "icu-firmware", SLOT_CCE: CCE,
                   SLOT_CONFIG: "ipu-config", SLOT_TILE_BOOTLOADER: "tile-bootloader"}


def make_party_identity(name: str):
    """(private key, self-signed certificate) for a party: a P-384 key-agreement key."""
    key = ec.generate_private_key(ec.SECP384R1())
    subject = certs.subject_name(name, key.public_key())
    return key, certs.issue_certificate(key, subject, subject, key.public_key(), ca=False,
                                        key_agreement=True)


def expected_slots(refs: dict, cc_mode=None) -> dict[int, bytes]:
    """Slot values a good boot and create_tee produce: one extend of zero per reference,
    and, when the party requires a CC mode, one extend of the cc-mode slot by it."""
    want = {s: extend_value(bytes(DIGEST_SIZE), refs[name])
            for s, name in _SLOT_REFERENCE.items()}
    if cc_mode is not None:
        want[SLOT_CC_MODE] = extend_value(bytes(DIGEST_SIZE), cc_mode_measurement(cc_mode))
    return want


@dataclass(frozen=True)
class VerifiedReport:
    report: AttestationReport
    report_hash: bytes
    ccu_public_key: ec.EllipticCurvePublicKey


def _hex(b: bytes) -> str:
    return b[:8].hex() + "…"


def _load_chain(certificates):
    """CIK, PIK and AK certificates of the evidence, each given as DER bytes or an
    ``x509.Certificate``; ChainError for anything else."""
    if isinstance(certificates, (str, bytes, bytearray, memoryview)):
        raise ChainError("the evidence's certificates are not a sequence of certificates")
    try:
        given = list(certificates)
    except TypeError:
        raise ChainError("the evidence's certificates are not a sequence of certificates") from None
    if len(given) != 3:
        raise ChainError(f"expected CIK, PIK and AK certificates, got {len(given)}")
    chain = []
    for name, c in zip(("CIK", "PIK", "AK"), given):
        if isinstance(c, (bytes, bytearray, memoryview)):
            try:
                c = x509.load_der_x509_certificate(bytes(c))
            except ValueError:
                raise ChainError(f"{name} certificate: the bytes are not a DER X.509 certificate") from None
        elif not isinstance(c, x509.Certificate):
            raise ChainError(f"{name} certificate is a {type(c).__name__}, neither DER bytes nor "
                             "an x509.Certificate")
        chain.append(c)
    return chain


def _check_link(child, parent, what):
    try:
        bc = parent.extensions.get_extension_for_class(x509.BasicConstraints).value
    except x509.ExtensionNotFound:
        bc = None
    except ValueError:          # cryptography parses extensions lazily: malformed ones raise here
        raise ChainError(f"{what}: the issuer's extensions do not parse") from None
    if bc is None or not bc.ca:
        raise ChainError(f"{what}: the issuer is not a CA certificate")
    try:
        child.verify_directly_issued_by(parent)
    except (InvalidSignature, ValueError, TypeError):
        raise ChainError(f"{what}: signature or issuer name does not verify") from None


class RelyingParty:
    """One party of a job: its identity key and certificate, trust anchors, manifest."""

    def __init__(self, party_id: int, key, certificate: x509.Certificate,
                 ca_certificate: x509.Certificate, reference: x509.Certificate,
                 manifest: JobManifest, cc_mode=None):
        """*cc_mode*: the confidential-computing mode this party requires of a device with
        a ``cc_ctrl`` (e.g. ``Mode.ON``); None for a device without one (slot 5 zero)."""
        self.party_id, self._key, self.certificate = party_id, key, certificate
        self.cc_mode = cc_mode
        self._ca, self._reference, self.manifest = ca_certificate, reference, manifest
        self.counter = 0                # last package counter used

    def verify(self, evidence, *, epoch: int = 0, checkpoint_id: int = 0) -> VerifiedReport:
        """Check ``evidence`` (report bytes and CIK, PIK, AK certificates, each DER bytes or
        an ``x509.Certificate``). Raises a :class:`~sw.ccu.errors.VerificationError`
        subclass (see the module docstring) on every failure, malformed input included."""
        refs = reference_measurements(self._reference, self._ca)
        cik, pik, ak = _load_chain(getattr(evidence, "certificates", None))
        _check_link(cik, self._ca, "CIK certificate ← manufacturer CA")
        _check_link(pik, cik, "PIK certificate ← CIK")
        _check_link(ak, pik, "AK certificate ← PIK")
        for cert, what, names in ((pik, "PIK certificate", (SBL, "icu-firmware")),
                                  (ak, "AK certificate", (CCE,))):
            found = certs.measurements_of(cert, what)
            for n in names:
                if found.get(n) != refs[n]:
                    raise MeasurementMismatchError(
                        f"{n} measurement in the {what} is {_hex(found.get(n, b''))}, "
                        f"reference {_hex(refs[n])}")
        blob = getattr(evidence, "report", None)
        if not isinstance(blob, (bytes, bytearray, memoryview)):
            raise MalformedReportError(f"the report is a {type(blob).__name__}, not bytes")
        body, sig = split_signed_report(bytes(blob))
        verify_report_signature(body, sig, ak.public_key())
        report = AttestationReport.decode(body)
        self._check_contents(report, refs, epoch, checkpoint_id)
        try:
            pub = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP384R1(), report.ecdh_public)
        except ValueError:
            raise MalformedReportError("the report's ECDH key is not a P-384 point") from None
        return VerifiedReport(report, report_hash(body), pub)

    def _check_contents(self, report, refs, epoch, checkpoint_id):
        want = expected_slots(refs, self.cc_mode)
        for s, value in enumerate(report.slots):
            good = want.get(s, bytes(DIGEST_SIZE))
            if value != good:
                name = SLOT_NAMES.get(s, "unused")
                if s == SLOT_CONFIG and value == _UNTRUSTED_CONFIG:
                    raise MeasurementMismatchError(
                        f"slot {s} ({name}) reports the SXP NOT in trusted mode (the CCU "
                        "read the trusted-mode bit as clear)")
                raise MeasurementMismatchError(f"slot {s} ({name}) is {_hex(value)}, "
                                               f"reference {_hex(good)}")
        m = self.manifest
        if report.job_id != m.job_id:
            raise ManifestMismatchError(f"report is for job {report.job_id.hex()}, "
                                        f"this party's job is {m.job_id.hex()}")
        if report.manifest_hash != m.hash():
            raise ManifestMismatchError(f"report's manifest hash {_hex(report.manifest_hash)}"
                                        f" is not this party's manifest {_hex(m.hash())}")
        mine = certs.fingerprint(self.certificate)
        if (self.party_id, mine) not in report.parties:
            raise FingerprintMissingError(f"party {self.party_id}'s certificate "
                                          f"{_hex(mine)} is not listed in the report")
        listed = tuple((p.party_id, p.fingerprint) for p in m.parties)
        if report.parties != listed:
            raise FingerprintMissingError("the report's party fingerprints are not the "
                                          "manifest's")
        if (report.epoch, report.checkpoint_id) != (epoch, checkpoint_id):
            raise EpochMismatchError(f"report has epoch {report.epoch}, checkpoint "
                                     f"{report.checkpoint_id}; agreed epoch {epoch}, "
                                     f"checkpoint {checkpoint_id}")

    def wrap_keys(self, verified: VerifiedReport, keys: dict[int, bytes], *,
                  nonce: bytes | None = None, resume_nonce: bytes | None = None) -> bytes:
        """A key package for ``verified``'s CCU; returns the package bytes. The nonce is
        fresh unless given (the party must remember it to resume later)."""
        nonce = os.urandom(NONCE_SIZE) if nonce is None else nonce
        self.counter += 1
        contents = KeyPackageContents(self.manifest.job_id, self.party_id, self.counter,
                                      nonce, tuple(sorted(keys.items())), resume_nonce)
        z = self._key.exchange(ec.ECDH(), verified.ccu_public_key)
        return seal_package(contents, z, verified.report_hash)
