"""Exception classes of the SPDM model: one class per kind of failure.

Three families:

- :class:`MalformedMessageError` and its subclasses: bytes that are not a message of the
  layout DSP0274 defines (too short, bytes left over, a field with a value the layout
  forbids, an unknown request/response code). Every decoder of :mod:`sw.spdm.messages`
  raises only these on bad bytes, never ``IndexError`` or ``struct.error``.
- :class:`VerificationError` and its subclasses: the requester rejected what the
  responder sent (certificate chain, signature, transcript MAC, nonce, measurement
  summary, an algorithm it did not offer).
- :class:`ErrorResponseError`: the responder answered with an SPDM ``ERROR`` message; the
  requester raises it with the error code and data. :class:`ProtocolError`: a response of
  the wrong kind (``DIGESTS`` where ``CERTIFICATE`` was due).

A caller that catches :class:`SpdmError` catches all of them.
"""

__all__ = [
    "SpdmError",
    "MalformedMessageError", "TruncatedMessageError", "TrailingBytesError", "InvalidFieldError",
    "UnknownCodeError",
    "VerificationError", "ChainError", "SignatureError", "VerifyDataError", "NonceError",
    "NegotiationError", "MeasurementSummaryError",
    "ErrorResponseError", "ProtocolError",
]


class SpdmError(Exception):
    """Base class of every error the SPDM model raises."""


# --- bytes that do not parse --------------------------------------------------------------

class MalformedMessageError(SpdmError):
    """The bytes are not a message of the layout DSP0274 defines for their code."""


class TruncatedMessageError(MalformedMessageError):
    """Shorter than the layout (or a length field inside it) requires."""


class TrailingBytesError(MalformedMessageError):
    """Bytes left over after the layout (and every length field inside it) is consumed."""


class InvalidFieldError(MalformedMessageError):
    """A field holds a value the layout forbids (a length that disagrees with the message,
    an algorithm structure of the wrong shape, a count that does not match)."""


class UnknownCodeError(MalformedMessageError):
    """The RequestResponseCode byte is not one this model decodes."""


# --- the requester rejects the responder's evidence --------------------------------------

class VerificationError(SpdmError):
    """The requester rejected the responder's answer."""


class ChainError(VerificationError):
    """The certificate chain does not parse, does not link (issuer signatures, CA
    constraints), does not end at the trusted root, or its digest differs from DIGESTS."""


class SignatureError(VerificationError):
    """A signature (CHALLENGE_AUTH, MEASUREMENTS, KEY_EXCHANGE_RSP) does not verify over
    the transcript under the leaf certificate's key."""


class VerifyDataError(VerificationError):
    """An HMAC verify data (ResponderVerifyData, RequesterVerifyData) does not match."""


class NonceError(VerificationError):
    """A response does not carry the nonce the request sent."""


class NegotiationError(VerificationError):
    """VERSION, CAPABILITIES or ALGORITHMS select something the requester did not offer
    or cannot use (no common version, an algorithm outside H100's set)."""


class MeasurementSummaryError(VerificationError):
    """A measurement summary hash is not the hash of the measurement blocks the
    responder reports."""


# --- the conversation went wrong ---------------------------------------------------------

class ErrorResponseError(SpdmError):
    """The responder answered with ERROR. ``code`` is the ErrorCode, ``data`` the ErrorData
    byte (Param2)."""

    def __init__(self, code, data=0):
        self.code = code
        self.data = data
        super().__init__(f"responder returned ERROR {code!r} (data 0x{data:02x})")


class ProtocolError(SpdmError):
    """A response of a different kind than the request calls for."""
