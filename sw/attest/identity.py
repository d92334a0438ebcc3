"""Certificate hierarchies of the attestation model besides the device's own
(:mod:`sw.spdm.identity`): the RIM signer's and the OCSP responders'.

RIM chain, the shape of NVIDIA's (``NVIDIA CoRIM signing Root CA`` → ``NVIDIA Reference
Value GH100 CA`` → ``… L3 GH100 001`` → ``HCC RIM L4 Signer``; every link ECDSA P-384 with
SHA-384), one level shorter:

    RIM root (self-signed CA)  →  reference-value CA  →  RIM signer (leaf, digitalSignature)

Keys come from seeds through :func:`sw.spdm.identity.derive_key`, so runs are
reproducible, and certificates from :func:`sw.spdm.identity.issue_certificate`, the one
builder of the attestation model (also for delegated OCSP signer certificates).
"""
import dataclasses

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec

from sw.spdm.identity import derive_key, issue_certificate, model_name

__all__ = ["RimAuthority", "RimSigner"]


@dataclasses.dataclass(frozen=True)
class RimSigner:
    """The key that signs RIMs and its certificates, signer first, root last."""
    key: ec.EllipticCurvePrivateKey
    certificates: tuple

    @property
    def root(self) -> x509.Certificate:
        return self.certificates[-1]


class RimAuthority:
    """The RIM publisher's hierarchy: root → reference-value CA → signers."""

    def __init__(self, seed: bytes = b"rim-authority"):
        if not isinstance(seed, bytes):
            raise TypeError("seed must be bytes")
        self.seed = seed
        self.root_key = derive_key(seed + b"/root")
        self.ca_key = derive_key(seed + b"/ca")
        root_name, ca_name = model_name("Model RIM signing Root CA"), model_name("Model Reference Value CA")
        self.root = issue_certificate(root_name, self.root_key, root_name, self.root_key, ca=True, path_len=2)
        self.ca = issue_certificate(ca_name, self.ca_key, root_name, self.root_key, ca=True, path_len=0)

    def signer(self, name: str = "Model RIM Signer") -> RimSigner:
        if not isinstance(name, str) or not name:
            raise TypeError("name must be a non-empty str")
        key = derive_key(self.seed + b"/signer/" + name.encode())
        cert = issue_certificate(model_name(name), key, self.ca.subject, self.ca_key, ca=False)
        return RimSigner(key, (cert, self.ca, self.root))
