"""Exception classes of the CCU model: one class per kind of bad input.

Every error is raised *before* anything changes, so a caller that catches it can carry on
(or retry with good input) from exactly the state it was in — with one deliberate
exception: :class:`BinaryMeasurementError` is a security event, not a bad argument, and the
CCE stops the TEE (tiles held, keys zeroed, secrets scrubbed) before raising it. Messages
name the mismatch (which slot, which certificate link, which job/party id, expected vs.
found).
"""

__all__ = [
    "CcuError",
    # boot and hardware
    "BootError", "FirmwareAuthError", "UdsLockedError", "SlotOwnerError",
    # host API
    "ApiOrderError", "ManifestError", "PartyCertificateError", "IncompleteKeysError",
    "ResumeError", "ScheduleExhaustedError", "TrustedModeError", "BinaryMeasurementError",
    # relying-party verification
    "VerificationError", "MalformedReportError", "ChainError", "MeasurementMismatchError",
    "ReportSignatureError", "ManifestMismatchError", "FingerprintMissingError",
    "EpochMismatchError",
    # key packages
    "KeyPackageError", "MalformedPackageError", "TruncatedPackageError", "WrongJobError",
    "WrongPartyError", "StaleReportError", "ReplayedPackageError", "PackageAuthError",
    "UnexpectedKeyError",
]


class CcuError(Exception):
    """Base class of every error the CCU model raises on bad input."""


# --- boot and hardware -------------------------------------------------------------------

class BootError(CcuError):
    """Measured boot cannot continue."""


class FirmwareAuthError(BootError):
    """A firmware image's signature does not verify under the firmware signing key."""


class UdsLockedError(BootError):
    """The UDS region was read after the primary bootloader locked it for this boot."""


class SlotOwnerError(CcuError):
    """A measurement slot was extended by a layer that does not own it (or no such slot)."""


# --- host API --------------------------------------------------------------------------

class ApiOrderError(CcuError):
    """A CCU API call was made in a state that does not allow it."""


class ManifestError(CcuError):
    """The job manifest is inconsistent (unknown key ids, context out of range, …)."""


class PartyCertificateError(CcuError):
    """The party certificates given to create_tee do not match the manifest."""


class IncompleteKeysError(CcuError):
    """launch() before every party's key package (or every scheduled key) arrived."""


class ResumeError(CcuError):
    """A resuming run lacks a party's resume nonce (or a fresh run got one)."""


class ScheduleExhaustedError(CcuError):
    """next_key_set() after the last key set of the manifest."""


class TrustedModeError(CcuError):
    """launch() while the port reads the SXP's trusted-mode bit as clear: no key goes into
    an SXP the host can still program."""


class BinaryMeasurementError(CcuError):
    """start_main(): the bootloader's measurement of the loaded binary is not the manifest's.
    Main execution is refused and the TEE is already STOPPED when this is raised."""


# --- relying-party verification --------------------------------------------------------

class VerificationError(CcuError):
    """A relying party rejected the evidence."""


class MalformedReportError(VerificationError):
    """The report bytes do not parse (wrong magic, version or length)."""


class ChainError(VerificationError):
    """A link of CA → CIK → PIK → AK (or the reference certificate) does not verify."""


class MeasurementMismatchError(VerificationError):
    """A measurement (certificate extension or report slot) differs from the reference."""


class ReportSignatureError(VerificationError):
    """The report's signature does not verify under the AK certificate."""


class ManifestMismatchError(VerificationError):
    """The report's manifest hash (or job id) is not the party's manifest."""


class FingerprintMissingError(VerificationError):
    """The party's certificate fingerprint is not listed in the report."""


class EpochMismatchError(VerificationError):
    """The report's epoch counter or checkpoint id is not what the party agreed to."""


# --- key packages ------------------------------------------------------------------------

class KeyPackageError(CcuError):
    """The CCU rejected a key package."""


class MalformedPackageError(KeyPackageError):
    """The package does not parse (magic, version, lengths, trailing bytes)."""


class TruncatedPackageError(MalformedPackageError):
    """The package is shorter than its structure requires."""


class WrongJobError(KeyPackageError):
    """The package is bound to another job id."""


class WrongPartyError(KeyPackageError):
    """The package comes from a party that is not in this job."""


class StaleReportError(KeyPackageError):
    """The package is bound to another attestation report (another TEE instance)."""


class ReplayedPackageError(KeyPackageError):
    """The package counter is not above the last one accepted from this party."""


class PackageAuthError(KeyPackageError):
    """AES-GCM authentication failed: the package was altered or not wrapped for us."""


class UnexpectedKeyError(KeyPackageError):
    """The package carries a key id the manifest does not assign to this party."""
