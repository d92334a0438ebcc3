"""Errors of :mod:`sw.attest`.

Bad *input* — bytes that are not a report, a certificate chain, a RIM or an OCSP message
of the expected layout, or arguments of the wrong type — raises :class:`AttestInputError`
(a ``ValueError``) or one of its subclasses. Evidence that parses but does not verify is
not an exception in the verifier: it is a named failure in the
:class:`~sw.attest.verifier.Verdict`. The stand-alone checks of :mod:`sw.attest.rim` and
:mod:`sw.attest.ocsp` raise :class:`RimSignatureError` / :class:`OcspError` (also
``AttestError``) so that a caller who wants an exception gets one.
"""

__all__ = ["AttestError", "AttestInputError", "ReportFormatError", "ChainFormatError", "RimFormatError",
           "RimSignatureError", "OcspError"]


class AttestError(ValueError):
    """Base class of every error :mod:`sw.attest` raises."""


class AttestInputError(AttestError):
    """Input that is not of the documented type or layout."""


class ReportFormatError(AttestInputError):
    """The attestation report (GET_MEASUREMENTS request || MEASUREMENTS response) does not
    parse, or its opaque data does not."""


class ChainFormatError(AttestInputError):
    """A certificate chain (PEM text, or DER list) does not parse."""


class RimFormatError(AttestInputError):
    """A RIM is not a well-formed SWID tag of NVIDIA's layout (or its XML does not parse)."""


class RimSignatureError(AttestError):
    """A RIM's XML signature or its signing certificate chain does not verify."""


class OcspError(AttestError):
    """An OCSP response does not verify (signature, signer, freshness, nonce, subject)."""
