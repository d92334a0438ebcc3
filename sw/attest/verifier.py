"""The local verifier: NVIDIA's default policy over an H100-style attestation report.

Inputs: the report (the GET_MEASUREMENTS request ‖ MEASUREMENTS response, NVIDIA's
"attestation report"), the device certificate chain (NVIDIA's PEM file, leaf first, or an
SPDM chain), the driver and VBIOS RIMs, the nonce the requester sent, and a
:class:`Policy` (roots, OCSP client or None, time of the check). Output: a
:class:`Verdict` with every claim and the list of named failures; ``verdict.ok`` is what
lets the CVM set the GPU ready (docs/attestation.md).

Checks, each a named failure when it fails (NVIDIA's ``cc_admin`` step in brackets):

- ``chain``: the device chain checks to the device root at the policy time
  (:func:`sw.attest.certs.check_path`) and has the policy's length (5 for H100)
  [verify_gpu_certificate_chain];
- ``fwid``: when the attestation leaf carries a TCG DICE FWID, it equals the report's
  ``OPAQUE_FIELD_ID_FWID`` [the FWID comparison in the same step]; a leaf without one is
  reported as ``fwid_in_certificate: None`` (our model's identity does not issue it);
- ``ocsp_device`` / ``ocsp_rim``: every certificate of the device chain but the root (also
  the leaf unless ``ocsp_leaf`` is off: NVIDIA skips it, because the H100's leaf is made by
  the FMC at boot and the OCSP service never saw it) and of both RIM signer chains is
  ``good`` in an OCSP response that verifies (:mod:`sw.attest.ocsp`); with ``ocsp=None``
  the check is off and the claims say ``"off"`` [ocsp_certificate_chain_validation];
- ``nonce``: the request's nonce is the one the requester sent [verify_attestation_report];
- ``report_signature``: the MEASUREMENTS signature verifies under the leaf's key — SPDM 1.1:
  ECDSA-SHA-384 over request ‖ response without the signature (NVIDIA's rule); SPDM 1.2:
  over the DSP0274 prefix ‖ SHA-384(VCA ‖ request ‖ response), which needs the VCA
  messages (``vca=``) [AttestationReport.verify_signature];
- ``driver_rim_signature`` / ``vbios_rim_signature``: XML signature and signer chain to the
  RIM root (:func:`sw.attest.rim.verify_rim_signature`) [RIM.verify];
- ``driver_version`` / ``vbios_version``: the report's ``DRIVER_VERSION`` (NUL stripped)
  and ``VBIOS_VERSION`` (NVIDIA's ``format_vbios_version``) equal the RIMs'
  ``colloquialVersion``, case-insensitively [RIM.verify's version match];
- ``rim_index_conflict``: an index active in both RIMs [generate_golden_measurement_list];
- ``measurements``: NVIDIA's ``Verifier.verify`` rule — at most as many active golden
  entries as report blocks; every active index of either RIM holds one of its
  alternatives, of the RIM's size; index 35 is skipped when ``NVDEC0_STATUS`` is 0x55
  (disabled); indices in neither RIM are not compared (listed as ``unchecked_indices``);
- ``cc_mode`` / ``devtools``: the policy slot (:data:`sw.attest.firmware.POLICY_SLOT`)
  decodes to CC mode on (``require_cc_mode``) and devtools off unless ``allow_devtools``.
  NVIDIA's report carries no such slot; for it the claims are ``"unknown"`` and the
  policy must not require them.

Bad input raises :class:`~sw.attest.errors.AttestInputError` (a ``ValueError``):
:class:`~sw.attest.errors.ReportFormatError` for a report that does not parse (garbage,
truncated, trailing bytes, an unsigned request, unknown opaque fields),
:class:`~sw.attest.errors.ChainFormatError`, :class:`~sw.attest.errors.RimFormatError`,
and ``AttestInputError`` for arguments of the wrong type.
"""
import dataclasses
import datetime

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec

from sw.spdm.errors import SignatureError, SpdmError
from sw.spdm.messages import NONCE_SIZE, V11, V12, GetMeasurements, Measurements, decode_request, decode_response
from sw.spdm.opaque import OpaqueField, decode_opaque
from sw.spdm.signing import MEASUREMENTS_CONTEXT
from sw.spdm.signing import verify as spdm_verify

from .certs import PathError, certificate_fwid, check_path, load_chain
from .errors import AttestInputError, OcspError, ReportFormatError, RimSignatureError
from .firmware import POLICY_SLOT, decode_policy
from .ocsp import OcspClient
from .rim import parse_rim, verify_rim_signature

__all__ = ["Policy", "Verdict", "Failure", "Report", "parse_report", "verify", "format_vbios_version",
           "FAILURE_NAMES", "NVDEC_DISABLED"]

NVDEC_DISABLED = 0x55
REQUEST_SIZE = 4 + NONCE_SIZE + 1
FAILURE_NAMES = ("chain", "fwid", "ocsp_device", "ocsp_rim", "nonce", "report_signature", "driver_rim_signature",
                 "vbios_rim_signature", "driver_version", "vbios_version", "rim_index_conflict", "measurements",
                 "cc_mode", "devtools")


@dataclasses.dataclass(frozen=True)
class Report:
    """A parsed attestation report."""
    raw_request: bytes
    raw_response: bytes
    request: GetMeasurements
    response: Measurements
    measurements: dict   # 0-based index -> value bytes
    opaque: dict         # OpaqueField id -> bytes

    @property
    def version(self):
        return self.response.version


def parse_report(data: bytes) -> Report:
    """Split and decode a report; raise ReportFormatError on anything but a signed
    GET_MEASUREMENTS(all) ‖ MEASUREMENTS with 1..64 DMTF blocks indexed 1..n and opaque data
    NVIDIA's parser reads (each field at most once)."""
    if not isinstance(data, (bytes, bytearray)):
        raise ReportFormatError(f"a report is bytes, not {type(data).__name__}")
    data = bytes(data)
    if len(data) < REQUEST_SIZE + 8 or data[1] != 0xE0 or not data[2] & 1:
        raise ReportFormatError("report does not start with a signed GET_MEASUREMENTS")
    raw_req, raw_rsp = data[:REQUEST_SIZE], data[REQUEST_SIZE:]
    try:
        req = decode_request(raw_req)
        rsp = decode_response(raw_rsp, request=req)
        if not isinstance(req, GetMeasurements) or not isinstance(rsp, Measurements):
            raise ReportFormatError("report is not GET_MEASUREMENTS ‖ MEASUREMENTS")
        if rsp.version != req.version or req.version not in (V11, V12):
            raise ReportFormatError(f"report versions 0x{req.version:02x}/0x{rsp.version:02x} are not 1.1/1.2")
        if req.operation != 0xFF or not 1 <= len(rsp.blocks) <= 64:
            raise ReportFormatError("report does not hold all measurements (1..64 blocks)")
        if [b.index for b in rsp.blocks] != list(range(1, len(rsp.blocks) + 1)):
            raise ReportFormatError("measurement blocks are not indexed 1..n in order")
        values = {b.index - 1: b.dmtf_value().value for b in rsp.blocks}
        fields = decode_opaque(rsp.opaque)
    except SpdmError as e:
        raise ReportFormatError(f"report does not parse: {e}") from None
    opaque = dict(fields)
    if len(opaque) != len(fields):
        raise ReportFormatError("an opaque field appears twice")
    return Report(raw_req, raw_rsp, req, rsp, values, opaque)


def format_vbios_version(field: bytes) -> str:
    """NVIDIA's ``format_vbios_version``: the 8-byte little-endian field 0x0000000196009f00
    reads as ``96.00.9f.00.01`` (upper half, then the two low bytes of the lower half)."""
    h = field[::-1].hex()
    t = h[len(h) // 2:] + h[len(h) // 2 - 2:len(h) // 2]
    return ".".join(t[i:i + 2] for i in range(0, len(t), 2))


@dataclasses.dataclass(frozen=True)
class Policy:
    """The verifier's policy. *device_root*, *rim_root*: trusted roots. *ocsp*: an
    :class:`~sw.attest.ocsp.OcspClient`, or None to switch OCSP off. *at*: the time of the
    check (None: now). The defaults are NVIDIA's default policy plus the CC-mode claim."""
    device_root: x509.Certificate
    rim_root: x509.Certificate
    ocsp: OcspClient = None
    ocsp_leaf: bool = True
    at: datetime.datetime = None
    chain_length: int = 5
    require_cc_mode: bool = True
    allow_devtools: bool = False

    def __post_init__(self):
        if not isinstance(self.device_root, x509.Certificate) or not isinstance(self.rim_root, x509.Certificate):
            raise AttestInputError("device_root and rim_root must be x509.Certificate")
        if self.ocsp is not None and not isinstance(self.ocsp, OcspClient):
            raise AttestInputError("ocsp must be an OcspClient or None")
        if self.at is not None and (not isinstance(self.at, datetime.datetime) or self.at.tzinfo is None):
            raise AttestInputError("at must be an aware datetime or None")
        for name in ("ocsp_leaf", "require_cc_mode", "allow_devtools"):
            if not isinstance(getattr(self, name), bool):
                raise AttestInputError(f"{name} must be a bool")
        if isinstance(self.chain_length, bool) or not isinstance(self.chain_length, int) or self.chain_length < 1:
            raise AttestInputError("chain_length must be a positive int")


@dataclasses.dataclass(frozen=True)
class Failure:
    name: str     # one of FAILURE_NAMES
    detail: str


@dataclasses.dataclass(frozen=True)
class Verdict:
    claims: dict
    failures: tuple

    @property
    def ok(self) -> bool:
        return not self.failures

    @property
    def names(self) -> set:
        return {f.name for f in self.failures}


def _ocsp_chain(client, certs, at, skip_leaf):
    """Per-certificate statuses of *certs* (leaf first, root last); failures as text."""
    statuses, problems = [], []
    for i, (cert, issuer) in enumerate(zip(certs, certs[1:])):
        if i == 0 and skip_leaf:
            statuses.append("skipped")
            continue
        try:
            result = client.status(cert, issuer, at=at)
        except OcspError as e:
            statuses.append("invalid")
            problems.append(str(e))
            continue
        statuses.append(result.status if result.status != "revoked" else f"revoked ({result.reason})")
        if result.status != "good":
            problems.append(f"{cert.subject.rfc4514_string()} is {statuses[-1]}")
    return statuses, problems


def _check_rim(kind, data, policy, at, claims, fail):
    rim = parse_rim(data)
    claims[f"{kind}_rim_version"] = rim.colloquial_version
    try:
        chain = verify_rim_signature(data, policy.rim_root, at=at)
        claims[f"{kind}_rim_signature"] = True
    except RimSignatureError as e:
        claims[f"{kind}_rim_signature"] = False
        fail(f"{kind}_rim_signature", str(e))
        chain = None
    if policy.ocsp is None:
        claims[f"{kind}_rim_ocsp"] = "off"
    elif chain is not None:
        statuses, problems = _ocsp_chain(policy.ocsp, chain, at, False)
        claims[f"{kind}_rim_ocsp"] = statuses
        for p in problems:
            fail("ocsp_rim", f"{kind} RIM: {p}")
    return rim


def verify(report: bytes, cert_chain, driver_rim: bytes, vbios_rim: bytes, *, nonce: bytes, policy: Policy,
           vca: bytes = b"") -> Verdict:
    """Verify one GPU's evidence under *policy*; see the module doc."""
    if not isinstance(policy, Policy):
        raise AttestInputError("policy must be a Policy")
    if not isinstance(nonce, (bytes, bytearray)) or len(nonce) != NONCE_SIZE:
        raise AttestInputError(f"nonce must be {NONCE_SIZE} bytes")
    if not isinstance(vca, (bytes, bytearray)):
        raise AttestInputError("vca must be bytes")
    at = policy.at or datetime.datetime.now(datetime.timezone.utc)
    parsed = parse_report(report)
    certs = load_chain(cert_chain)
    claims, failures = {}, []

    def fail(name, detail):
        failures.append(Failure(name, detail))

    op = parsed.opaque
    claims["spdm_version"] = f"{parsed.version >> 4}.{parsed.version & 0xF}"
    claims["report_nonce"] = parsed.request.nonce.hex()
    claims["driver_version"] = op.get(OpaqueField.DRIVER_VERSION, b"").removesuffix(b"\0").decode("ascii", "replace")
    vbios = op.get(OpaqueField.VBIOS_VERSION)
    claims["vbios_version"] = format_vbios_version(vbios) if vbios else ""
    cn = certs[1].subject.get_attributes_for_oid(x509.NameOID.COMMON_NAME) if len(certs) > 1 else []
    claims["hwmodel"] = cn[0].value if cn else None  # NVIDIA's hwmodel claim: the device CA's CN

    # certificate chain, FWID, OCSP
    path = None
    try:
        if len(certs) != policy.chain_length:
            raise PathError(f"chain holds {len(certs)} certificates, not {policy.chain_length}")
        path = check_path(certs, policy.device_root, at, "device chain")
        claims["chain"] = True
    except PathError as e:
        claims["chain"] = False
        fail("chain", str(e))
    cert_fwid = certificate_fwid(certs[0])
    claims["fwid_in_certificate"] = cert_fwid.hex() if cert_fwid is not None else None
    report_fwid = op.get(OpaqueField.FWID, b"")
    if cert_fwid is not None and report_fwid and cert_fwid != report_fwid:
        fail("fwid", "the leaf's FWID is not the report's OPAQUE_FIELD_ID_FWID")
    if policy.ocsp is None:
        claims["device_ocsp"] = "off"
    elif path is not None:
        statuses, problems = _ocsp_chain(policy.ocsp, path, at, not policy.ocsp_leaf)
        claims["device_ocsp"] = statuses
        for p in problems:
            fail("ocsp_device", p)
    else:
        claims["device_ocsp"] = "not checked (chain invalid)"

    # nonce and report signature
    claims["nonce_match"] = parsed.request.nonce == bytes(nonce)
    if not claims["nonce_match"]:
        fail("nonce", "the report's request nonce is not the one sent")
    leaf_key = certs[0].public_key()
    sig_ok = False
    if not isinstance(leaf_key, ec.EllipticCurvePublicKey) or leaf_key.curve.name != "secp384r1":
        fail("report_signature", "the attestation key is not ECDSA P-384")
    elif parsed.version >= V12 and not vca:
        fail("report_signature", "an SPDM 1.2 report signature covers the VCA messages: pass vca=")
    else:
        transcript = (bytes(vca) if parsed.version >= V12 else b"") + parsed.raw_request + \
            parsed.raw_response[:-len(parsed.response.signature)]
        try:
            spdm_verify(leaf_key, parsed.version, MEASUREMENTS_CONTEXT, transcript, parsed.response.signature)
            sig_ok = True
        except SignatureError as e:
            fail("report_signature", str(e))
    claims["report_signature"] = sig_ok

    # RIMs: signatures, OCSP, versions
    drv = _check_rim("driver", driver_rim, policy, at, claims, fail)
    vb = _check_rim("vbios", vbios_rim, policy, at, claims, fail)
    if claims["driver_version"].lower() != drv.colloquial_version.lower():
        fail("driver_version", f"report driver {claims['driver_version']!r}, RIM {drv.colloquial_version!r}")
    if claims["vbios_version"].lower() != vb.colloquial_version.lower():
        fail("vbios_version", f"report VBIOS {claims['vbios_version']!r}, RIM {vb.colloquial_version!r}")

    # measurements (NVIDIA's Verifier rule)
    golden = {i: (m, "driver") for i, m in drv.active().items()}
    conflicts = sorted(set(golden) & set(vb.active()))
    if conflicts:
        fail("rim_index_conflict", f"indices active in both RIMs: {conflicts}")
    golden.update({i: (m, "vbios") for i, m in vb.active().items() if i not in golden})
    nvdec_disabled = op.get(OpaqueField.NVDEC0_STATUS) == bytes((NVDEC_DISABLED,))
    runtime = parsed.measurements
    mismatched = []
    if len(golden) > len(runtime):
        fail("measurements", f"{len(golden)} active golden measurements, {len(runtime)} in the report")
    else:
        for i, (m, source) in sorted(golden.items()):
            if i == 35 and nvdec_disabled:
                continue
            if i not in runtime or not m.matches(runtime[i]):
                mismatched.append((i, source))
        if mismatched:
            fail("measurements", f"mismatched indices (0-based, source): {mismatched}")
    claims["measurements_match"] = not mismatched and "measurements" not in {f.name for f in failures}
    claims["mismatched_indices"] = [i for i, _ in mismatched]
    claims["unchecked_indices"] = sorted(set(runtime) - set(golden))

    # CC mode and devtools
    cc_mode, devtools = decode_policy(runtime.get(POLICY_SLOT, b""))
    claims["cc_mode"], claims["devtools"] = cc_mode, devtools
    if policy.require_cc_mode and cc_mode != "on":
        fail("cc_mode", f"CC mode is {cc_mode}")
    if devtools and not policy.allow_devtools:
        fail("devtools", "the GPU runs in CC devtools mode")
    return Verdict(claims, tuple(failures))
