"""Reference integrity manifests (RIMs): NVIDIA's SWID-tag format, its XML signature, and
a writer for the modelled driver and VBIOS.

Format (ISO/IEC 19770-2 SWID tag with the TCG RIM information model, as in the RIMs
``nv-local-gpu-verifier`` ships): a ``SoftwareIdentity`` root with an ``Entity``, a
``Meta`` whose ``colloquialVersion`` is the driver version (``550.90.07``) or VBIOS
version (``96.00.9F.00.01``), a ``Payload`` of ``Resource type="Measurement"`` entries —
``index`` (0-based: report block *index*+1), ``active`` (``True``/``False``), ``size``
(bytes), ``alternatives`` *n* and *n* attributes ``Hash0`` … ``Hash{n-1}`` in the
``http://www.w3.org/2001/04/xmlenc#sha384`` namespace (hex of an acceptable value) — and an
enveloped XMLDSig ``Signature``.

Signature check (:func:`verify_rim_signature`), XMLDSig core validation restricted to what
NVIDIA's RIMs use: one ``Signature``, a child of the root; ``SignatureMethod``
``ecdsa-sha384`` (``SignatureValue`` = raw r ‖ s, 96 bytes); one ``Reference URI=""``
with the transforms ``enveloped-signature`` then a canonicalization; ``DigestMethod``
SHA-384. The digest is over the canonical form of the document without the
``Signature`` element, the signature over the canonical form of ``SignedInfo``.
Canonicalization: NVIDIA's RIMs name C14N 1.1 (``xml-c14n11``); lxml implements C14N 1.0,
which gives the same bytes as 1.1 for a document without ``xml:`` attributes (1.1 only
changes how ``xml:id``/``xml:base``/``xml:lang``/``xml:space`` are inherited into a
document subset), so a RIM using C14N 1.1 and carrying any ``xml:`` attribute is refused.
Exclusive C14N (``xml-exc-c14n#``) and C14N 1.0 are also accepted. The signer is the
first ``X509Certificate`` of ``KeyInfo``; the others lead to the given RIM root
(:func:`sw.attest.certs.check_path`). Base64 text (certificates, signature) must be the
canonical encoding of its bytes, so no byte of it is ignored.

Bad input raises :class:`~sw.attest.errors.RimFormatError`; a signature or chain that does
not verify raises :class:`~sw.attest.errors.RimSignatureError`.
"""
import base64
import binascii
import copy
import dataclasses
import datetime
import hashlib

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature, encode_dss_signature
from lxml import etree

from .certs import PathError, check_path, der, parsed
from .errors import ChainFormatError, RimFormatError, RimSignatureError
from .identity import RimSigner

__all__ = ["Rim", "GoldenMeasurement", "parse_rim", "verify_rim_signature", "write_rim", "SWID_NS", "TCG_NS",
           "HASH_NS", "DS_NS"]

SWID_NS = "http://standards.iso.org/iso/19770/-2/2015/schema.xsd"
TCG_NS = "https://trustedcomputinggroup.org/resource/tcg-reference-integrity-manifest-rim-information-model/"
HASH_NS = "http://www.w3.org/2001/04/xmlenc#sha384"
DS_NS = "http://www.w3.org/2000/09/xmldsig#"
C14N11 = "http://www.w3.org/2006/12/xml-c14n11"
C14N10 = "http://www.w3.org/TR/2001/REC-xml-c14n-20010315"
EXC_C14N = "http://www.w3.org/2001/10/xml-exc-c14n#"
ENVELOPED = "http://www.w3.org/2000/09/xmldsig#enveloped-signature"
ECDSA_SHA384 = "http://www.w3.org/2001/04/xmldsig-more#ecdsa-sha384"
SHA384_DIGESTS = ("http://www.w3.org/2001/04/xmldsig-more#sha384", "http://www.w3.org/2001/04/xmlenc#sha384")
_C14N = {C14N11: False, C14N10: False, EXC_C14N: True}  # algorithm -> exclusive
_XML_NS = "http://www.w3.org/XML/1998/namespace"
MAX_RIM_BYTES = 1 << 20


@dataclasses.dataclass(frozen=True)
class GoldenMeasurement:
    """One ``Resource``: the acceptable values of report index *index* (0-based)."""
    index: int
    name: str
    size: int
    active: bool
    alternatives: tuple  # bytes, each *size* long

    def matches(self, value: bytes) -> bool:
        return len(value) == self.size and value in self.alternatives


@dataclasses.dataclass(frozen=True)
class Rim:
    """A parsed RIM (not yet signature-checked: see :func:`verify_rim_signature`)."""
    product: str
    tag_id: str
    colloquial_version: str
    meta: dict
    measurements: dict  # index -> GoldenMeasurement

    def active(self) -> dict:
        return {i: m for i, m in self.measurements.items() if m.active}


def _parse_xml(data):
    if not isinstance(data, (bytes, bytearray)):
        raise RimFormatError(f"a RIM is bytes, not {type(data).__name__}")
    if len(data) > MAX_RIM_BYTES:
        raise RimFormatError(f"RIM of {len(data)} bytes exceeds {MAX_RIM_BYTES}")
    parser = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False, huge_tree=False,
                             remove_comments=False)
    try:
        root = etree.fromstring(bytes(data), parser)
    except (etree.XMLSyntaxError, ValueError) as e:
        raise RimFormatError(f"RIM XML does not parse: {e}") from None
    if root is None or root.getroottree().docinfo.doctype:
        raise RimFormatError("RIM carries a DOCTYPE")
    if root.tag != f"{{{SWID_NS}}}SoftwareIdentity":
        raise RimFormatError(f"RIM root is {root.tag}, not SoftwareIdentity")
    return root


def _one(parent, tag, what):
    found = parent.findall(tag)
    if len(found) != 1:
        raise RimFormatError(f"{what}: {len(found)} {tag.split('}')[-1]} elements, not one")
    return found[0]


def _hex(text, size, what):
    try:
        value = bytes.fromhex(text)
    except ValueError:
        raise RimFormatError(f"{what} is not hex") from None
    if len(value) != size:
        raise RimFormatError(f"{what} is {len(value)} bytes, not size {size}")
    return value


def _int_attr(elem, name, lo, hi):
    text = elem.get(name)
    if text is None or not text.isascii() or not text.isdigit() or not lo <= int(text) <= hi:
        raise RimFormatError(f"Resource attribute {name}={text!r} is not an integer in {lo}..{hi}")
    return int(text)


def parse_rim(data: bytes) -> Rim:
    """Parse a RIM's content (NVIDIA's layout); no signature check."""
    root = _parse_xml(data)
    meta = _one(root, f"{{{SWID_NS}}}Meta", "RIM")
    version = meta.get("colloquialVersion")
    if not version:
        raise RimFormatError("Meta has no colloquialVersion")
    payload = _one(root, f"{{{SWID_NS}}}Payload", "RIM")
    measurements = {}
    for res in payload:
        if not isinstance(res.tag, str):
            continue  # a comment or processing instruction
        if res.tag != f"{{{SWID_NS}}}Resource" or res.get("type") != "Measurement":
            raise RimFormatError(f"Payload child {res.tag} is not a Measurement Resource")
        index = _int_attr(res, "index", 0, 254)
        size = _int_attr(res, "size", 1, 1024)
        n = _int_attr(res, "alternatives", 1, 64)
        active = res.get("active")
        if active not in ("True", "False"):
            raise RimFormatError(f"Resource {index}: active={active!r} is not True/False")
        alts = []
        for k in range(n):
            text = res.get(f"{{{HASH_NS}}}Hash{k}")
            if text is None:
                raise RimFormatError(f"Resource {index}: no Hash{k} of its {n} alternatives")
            alts.append(_hex(text, size, f"Resource {index} Hash{k}"))
        if index in measurements:
            raise RimFormatError(f"two Resources at index {index}")
        measurements[index] = GoldenMeasurement(index, res.get("name", ""), size, active == "True", tuple(alts))
    if not measurements:
        raise RimFormatError("RIM has no measurements")
    return Rim(root.get("name", ""), root.get("tagId", ""), version,
               {k: v for k, v in meta.attrib.items()}, measurements)


def _b64(text, what):
    compact = "".join((text or "").split())
    try:
        raw = base64.b64decode(compact, validate=True)
    except (binascii.Error, ValueError):
        raise RimFormatError(f"{what} is not base64") from None
    if base64.b64encode(raw).decode() != compact:
        raise RimFormatError(f"{what} is not the canonical base64 of its bytes")
    return raw


def _c14n(elem, exclusive):
    try:
        return etree.tostring(elem, method="c14n", exclusive=exclusive, with_comments=False)
    except etree.Error as e:  # libxml2 refuses e.g. a relative namespace URI
        raise RimFormatError(f"RIM cannot be canonicalized: {e}") from None


def _without_signature(root, signature):
    """The enveloped-signature transform: the document with the Signature element removed
    (its tail text kept, as the transform removes only the element node)."""
    doc = copy.deepcopy(root)
    sig = doc[root.index(signature)]
    tail = sig.tail or ""
    prev = sig.getprevious()
    if prev is not None:
        prev.tail = (prev.tail or "") + tail
    else:
        doc.text = (doc.text or "") + tail
    doc.remove(sig)
    return doc


def _signed_info(root):
    """Check the Signature's shape; return (signature, signed_info, c14n exclusive flag,
    digest value, signature value, certificates)."""
    sigs = root.findall(f".//{{{DS_NS}}}Signature")
    if len(sigs) != 1 or sigs[0].getparent() is not root:
        raise RimFormatError("RIM needs exactly one Signature, a child of the root (enveloped)")
    sig = sigs[0]
    ds = f"{{{DS_NS}}}"
    si = _one(sig, ds + "SignedInfo", "Signature")
    c14n_alg = _one(si, ds + "CanonicalizationMethod", "SignedInfo").get("Algorithm")
    if c14n_alg not in _C14N:
        raise RimFormatError(f"CanonicalizationMethod {c14n_alg} is not supported")
    if _one(si, ds + "SignatureMethod", "SignedInfo").get("Algorithm") != ECDSA_SHA384:
        raise RimFormatError("SignatureMethod is not ecdsa-sha384")
    ref = _one(si, ds + "Reference", "SignedInfo")
    if ref.get("URI") != "":
        raise RimFormatError("Reference URI is not the whole document")
    transforms = [t.get("Algorithm") for t in _one(ref, ds + "Transforms", "Reference").findall(ds + "Transform")]
    if len(transforms) != 2 or transforms[0] != ENVELOPED or transforms[1] not in _C14N:
        raise RimFormatError(f"Transforms {transforms} are not enveloped-signature then a canonicalization")
    if _one(ref, ds + "DigestMethod", "Reference").get("Algorithm") not in SHA384_DIGESTS:
        raise RimFormatError("DigestMethod is not SHA-384")
    for alg in (c14n_alg, transforms[1]):
        if alg == C14N11 and any(a.startswith(f"{{{_XML_NS}}}") for e in root.iter() if isinstance(e.tag, str)
                                 for a in e.attrib):
            raise RimFormatError("C14N 1.1 with xml: attributes is not supported (lxml implements 1.0)")
    digest = _b64(_one(ref, ds + "DigestValue", "Reference").text, "DigestValue")
    signature = _b64(_one(sig, ds + "SignatureValue", "Signature").text, "SignatureValue")
    x509data = _one(_one(sig, ds + "KeyInfo", "Signature"), ds + "X509Data", "KeyInfo")
    cert_elems = x509data.findall(ds + "X509Certificate")
    if not cert_elems or len(cert_elems) != len(x509data):
        raise RimFormatError("X509Data must hold X509Certificate elements only")
    try:
        certs = [parsed(x509.load_der_x509_certificate(_b64(e.text, "X509Certificate"))) for e in cert_elems]
    except ValueError as e:
        if isinstance(e, RimFormatError):
            raise
        if isinstance(e, ChainFormatError):
            raise RimFormatError(f"a KeyInfo certificate: {e}") from None
        raise RimFormatError(f"a KeyInfo certificate does not parse: {e}") from None
    return sig, si, _C14N[c14n_alg], _C14N[transforms[1]], digest, signature, certs


def verify_rim_signature(data: bytes, rim_root: x509.Certificate, *, at: datetime.datetime) -> list:
    """Verify the RIM's enveloped XML signature and its signer's chain to *rim_root* at time
    *at*; return the chain, signer first. Raises RimSignatureError or RimFormatError."""
    if not isinstance(rim_root, x509.Certificate):
        raise RimFormatError("rim_root must be an x509.Certificate")
    if not isinstance(at, datetime.datetime) or at.tzinfo is None:
        raise RimFormatError("at must be an aware datetime")
    root = _parse_xml(data)
    sig, si, si_exclusive, doc_exclusive, digest, signature, certs = _signed_info(root)
    if hashlib.sha384(_c14n(_without_signature(root, sig), doc_exclusive)).digest() != digest:
        raise RimSignatureError("DigestValue is not the SHA-384 of the canonical document")
    if len(signature) != 96:
        raise RimSignatureError(f"SignatureValue is {len(signature)} bytes, not 96")
    key = certs[0].public_key()
    if not isinstance(key, ec.EllipticCurvePublicKey) or key.curve.name != "secp384r1":
        raise RimSignatureError("the RIM signer's key is not ECDSA P-384")
    dss = encode_dss_signature(int.from_bytes(signature[:48], "big"), int.from_bytes(signature[48:], "big"))
    try:
        key.verify(dss, _c14n(si, si_exclusive), ec.ECDSA(hashes.SHA384()))
    except InvalidSignature:
        raise RimSignatureError("SignatureValue does not verify over SignedInfo") from None
    try:
        return check_path(certs, rim_root, at, "RIM signer chain")
    except PathError as e:
        raise RimSignatureError(str(e)) from None


# --- writer -----------------------------------------------------------------------------------

def write_rim(*, product: str, version: str, golden: dict, signer: RimSigner, slots: int = 64,
              firmware_manufacturer: str = "CC Accel Model", tag_id: str = None) -> bytes:
    """A signed RIM in NVIDIA's layout. *golden*: ``{index: [value, ...]}`` — the active
    entries (index 0-based, values 48 bytes); every other index below *slots* is written
    inactive with a zero value, as NVIDIA's RIMs list all 64. Signed like NVIDIA's: C14N
    1.1 (computed as 1.0, see the module doc), ECDSA-SHA-384, and KeyInfo holding the
    signer's certificates signer first, root last, as NVIDIA's does."""
    if not isinstance(product, str) or not isinstance(version, str) or not version:
        raise TypeError("product and version must be str (version non-empty)")
    if not isinstance(signer, RimSigner):
        raise TypeError("signer must be a RimSigner")
    if not isinstance(golden, dict) or not all(isinstance(i, int) and 0 <= i < slots for i in golden):
        raise ValueError(f"golden must map indices 0..{slots - 1} to value lists")
    for i, values in golden.items():
        if not values or not all(isinstance(v, bytes) and len(v) == 48 for v in values):
            raise ValueError(f"golden index {i}: one or more 48-byte values")
    nsmap = {None: SWID_NS, "ns0": SWID_NS, "ns2": HASH_NS}
    root = etree.Element(f"{{{SWID_NS}}}SoftwareIdentity", nsmap=nsmap)
    digest_of_content = hashlib.sha384(repr(sorted(golden.items())).encode() + version.encode()).hexdigest()
    for k, v in (("corpus", "false"), ("name", product), ("patch", "false"), ("supplemental", "false"),
                 ("tagId", tag_id or digest_of_content), ("version", "1.0"), ("tagVersion", "0")):
        root.set(k, v)
    root.text = "\n    "
    entity = etree.SubElement(root, f"{{{SWID_NS}}}Entity", name=firmware_manufacturer,
                              role="softwareCreator tagCreator")
    entity.tail = "\n    "
    meta = etree.SubElement(root, f"{{{SWID_NS}}}Meta", nsmap={"ns1": TCG_NS})
    for k, v in (("colloquialVersion", version), ("edition", "GPU"), ("product", product), ("revision", "r1"),
                 ("PayloadType", "direct")):
        meta.set(k, v)
    for k, v in (("BindingSpec", "RIMIM"), ("BindingSpecVersion", "1.01"), ("PlatformModel", product),
                 ("FirmwareManufacturer", firmware_manufacturer), ("FirmwareManufacturerId", "0")):
        meta.set(f"{{{TCG_NS}}}{k}", v)
    meta.tail = "\n    "
    payload = etree.SubElement(root, f"{{{SWID_NS}}}Payload")
    payload.text = "\n        "
    for i in range(slots):
        values = golden.get(i, [bytes(48)])
        res = etree.SubElement(payload, f"{{{SWID_NS}}}Resource", type="Measurement", index=str(i),
                               active=str(i in golden), alternatives=str(len(values)))
        for k, v in enumerate(values):
            res.set(f"{{{HASH_NS}}}Hash{k}", v.hex())
        res.set("name", f"Measurement_{i}")
        res.set("size", "48")
        res.tail = "\n        " if i + 1 < slots else "\n    "
    payload.tail = "\n"
    digest = hashlib.sha384(_c14n(root, False)).digest()
    ds = f"{{{DS_NS}}}"
    sig = etree.SubElement(root, ds + "Signature", nsmap={"ds": DS_NS})
    si = etree.SubElement(sig, ds + "SignedInfo")
    etree.SubElement(si, ds + "CanonicalizationMethod", Algorithm=C14N11)
    etree.SubElement(si, ds + "SignatureMethod", Algorithm=ECDSA_SHA384)
    ref = etree.SubElement(si, ds + "Reference", URI="")
    tr = etree.SubElement(ref, ds + "Transforms")
    etree.SubElement(tr, ds + "Transform", Algorithm=ENVELOPED)
    etree.SubElement(tr, ds + "Transform", Algorithm=C14N11)
    etree.SubElement(ref, ds + "DigestMethod", Algorithm=SHA384_DIGESTS[0])
    etree.SubElement(ref, ds + "DigestValue").text = base64.b64encode(digest).decode()
    r, s = decode_dss_signature(signer.key.sign(_c14n(si, False), ec.ECDSA(hashes.SHA384())))
    etree.SubElement(sig, ds + "SignatureValue").text = base64.b64encode(r.to_bytes(48, "big")
                                                                        + s.to_bytes(48, "big")).decode()
    x509data = etree.SubElement(etree.SubElement(sig, ds + "KeyInfo"), ds + "X509Data")
    for cert in signer.certificates:
        etree.SubElement(x509data, ds + "X509Certificate").text = base64.b64encode(der(cert)).decode()
    return etree.tostring(root)


def rim_root_pem(rim_root: x509.Certificate) -> bytes:
    return rim_root.public_bytes(serialization.Encoding.PEM)
