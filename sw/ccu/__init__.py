"""CCU firmware model (ITX root of trust): DICE identity UDS → HDI/CDI → CIK/PIK/AK,
X.509 certificates, 64-slot measurement storage, AK-signed attestation reports,
ECDH-wrapped key packages from each party, run-key derivation, and key installation into
the SXPs through :class:`CcuPort`, the check of the loaded binary's measurement before
main execution, and the handling of the device's exception pin. See docs/ccu.md."""
from .ca import ManufacturerCA, reference_measurements
from .cce import AttestationEvidence, Cce, ExceptionEvent, LaunchInfo, ResumePoint, TeeState
from .device import Device
from .errors import *  # noqa: F403  (the exception classes are part of the API)
from .errors import __all__ as _errors
from .keypkg import checkpoint_key, final_model_key
from .manifest import (
                       KEY_CHECKPOINT,
                       KEY_FINAL_MODEL,
                       KEY_RESUME_CHECKPOINT,
                       ConfigWrite,
                       JobManifest,
                       KeyInstall,
                       PartyEntry,
)
from .measure import MeasurementStore
from .party import RelyingParty, VerifiedReport, make_party_identity
from .report import AttestationReport
from .sxp_port import CcuPort, ExceptionCause, ExceptionSource, RecordingSxpPort, SxpKeyPort, SxpRegister

__all__ = ["ManufacturerCA", "reference_measurements", "AttestationEvidence", "Cce",
           "ExceptionEvent", "LaunchInfo", "ResumePoint", "TeeState", "Device", "checkpoint_key",
           "final_model_key", "KEY_CHECKPOINT", "KEY_FINAL_MODEL", "KEY_RESUME_CHECKPOINT",
           "ConfigWrite", "JobManifest", "KeyInstall", "PartyEntry", "MeasurementStore",
           "RelyingParty", "VerifiedReport", "make_party_identity", "AttestationReport",
           "CcuPort", "ExceptionCause", "ExceptionSource", "RecordingSxpPort", "SxpKeyPort",
           "SxpRegister", *_errors]
