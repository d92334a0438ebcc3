"""SPDM (DMTF DSP0274 1.1/1.2) model of the H100-style GPU's attestation and session set-up:
message codecs, the GPU firmware's responder (the RTR, signing measurements with the
device's attestation key), the CVM driver's requester, and the key schedule whose
session keys the firmware would install into ``cc_dma``. See docs/spdm.md."""
from .errors import *  # noqa: F403  (the exception classes are part of the API)
from .errors import __all__ as _errors
from .identity import DeviceIdentity, Manufacturer
from .keys import DirectionKeys, SessionKeys
from .requester import Requester, SessionResult, verify_chain
from .responder import Responder

__all__ = ["DeviceIdentity", "Manufacturer", "DirectionKeys", "SessionKeys", "Requester", "SessionResult",
           "verify_chain", "Responder", *_errors]
