"""Confidential Compute Engine: the CCU API the untrusted host drives.

State machine (any other call raises :class:`ApiOrderError` and changes nothing)::

    READY --create_tee--> CREATED --launch--> BOOTING --start_main--> RUNNING
                          | get_attestation_report  | get_attestation_report
                          | submit_key_package      |                 | get_attestation_report
                                                                      | next_key_set
    CREATED, BOOTING, RUNNING --terminate--> TERMINATED
    CREATED, BOOTING, RUNNING --on_exception, start_main refused--> STOPPED
    STOPPED --terminate--> TERMINATED

``BOOTING``: key set 0 is installed and the tiles run the tile bootloader, which loads and
measures the binary; ``start_main(measurement)`` lets main execution start only if that
measurement is the manifest's. ``STOPPED``: an exception (or a refused measurement) held
the tiles, zeroed every key context and scrubbed every secret; from there only
``terminate`` leads on (to TERMINATED, with nothing left to scrub). ``TERMINATED`` is
final: like the IPU's trusted mode, only a device reset leads out.

Every call validates all of its input before its first side effect, except
``start_main``'s refusal (a security event: it stops the TEE, then raises
:class:`BinaryMeasurementError`) and ``create_tee``'s when the SXP refuses trusted mode
(the configuration is written by then: :class:`TrustedModeError`, the state stays READY).
``on_exception`` is accepted in every state: it logs the event and stops a TEE that is
CREATED, BOOTING or RUNNING.
"""
import enum
import hmac
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from . import certs
from .dice import zeroize
from .errors import (
    ApiOrderError,
    BinaryMeasurementError,
    IncompleteKeysError,
    MalformedPackageError,
    ManifestError,
    PartyCertificateError,
    ReplayedPackageError,
    ResumeError,
    ScheduleExhaustedError,
    StaleReportError,
    TrustedModeError,
    UnexpectedKeyError,
    WrongJobError,
    WrongPartyError,
)
from .keypkg import checkpoint_key, final_model_key, open_package, parse_header
from .manifest import KEY_CHECKPOINT, KEY_FINAL_MODEL, KEY_RESUME_CHECKPOINT, JobManifest
from .measure import SLOT_CC_MODE, SLOT_CONFIG, SLOT_TILE_BOOTLOADER, cc_mode_measurement, config_measurement, measure
from .report import AttestationReport, report_hash, sign_report
from .sxp_port import KEY_SIZE, ExceptionCause, ExceptionSource, config_entries

__all__ = ["TeeState", "ResumePoint", "AttestationEvidence", "LaunchInfo", "ExceptionEvent",
           "Cce"]


class TeeState(enum.Enum):
    READY = "ready"
    CREATED = "created"
    BOOTING = "booting"          # launched: tile bootloader loading and measuring the binary
    RUNNING = "running"          # main execution (started by start_main)
    TERMINATED = "terminated"
    STOPPED = "stopped"          # an exception (or a refused binary) stopped the job


_LIVE = (TeeState.CREATED, TeeState.BOOTING, TeeState.RUNNING)


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


@dataclass(frozen=True)
class ResumePoint:
    """The checkpoint a run resumes from: it was written in ``epoch``."""
    epoch: int
    checkpoint_id: int


@dataclass(frozen=True)
class AttestationEvidence:
    report: bytes                        # signed report (report.py)
    certificates: tuple[bytes, ...]      # DER: CIK (CA-issued), PIK (CIK-signed), AK


@dataclass(frozen=True)
class ExceptionEvent:
    """One entry of the CCU's exception log."""
    sequence: int                # 1, 2, … over the device's life (survives chip resets)
    cause: ExceptionCause
    state: TeeState              # the TEE's state when the exception arrived
    job_id: bytes | None         # the job it hit (None: no TEE)
    stopped: bool                # True if it stopped a TEE (CREATED/BOOTING/RUNNING)
    time: int | None = None      # the caller's timestamp (e.g. simulation cycle), if given


@dataclass(frozen=True)
class LaunchInfo:
    """What launch() deploys to the tiles with the autoloader."""
    tile_bootloader: bytes
    epoch: int
    checkpoint_id: int


class Cce:
    """The third CCU layer. Holds the AK from the secondary bootloader and, during a TEE,
    the ECDH key, the parties' keys and the derived run keys."""

    def __init__(self, ak, certificates, store, port, tile_bootloader: bytes, cc_mode=None,
                 exception_log: list | None = None):
        """*port* is a :class:`~sw.ccu.sxp_port.CcuPort`; *exception_log* the list the
        events go to (the device keeps one across resets; a fresh one if None)."""
        self._ak, self._certs, self._store, self._port = ak, certificates, store, port
        self._tile_bootloader = tile_bootloader
        self._cc_mode = cc_mode      # callable: the active CC mode, or None (no cc_ctrl)
        self._log = [] if exception_log is None else exception_log
        self.state = TeeState.READY
        self._clear_tee()

    def _clear_tee(self):
        self._manifest = self._party_keys = self._ecdh = self._evidence = None
        self._report_hash = self._resume = None
        self._epoch = self._checkpoint_id = 0
        self._packages = {}      # party id -> (counter, nonce, resume nonce, {key id: key})
        self._keys = {}          # key id -> bytearray, filled at launch
        self._next_set = 0
        self._installed = set()

    def _require(self, call, *states):
        if self.state not in states:
            allowed = " or ".join(s.value for s in states)
            raise ApiOrderError(f"{call}() is not allowed in state {self.state.value} "
                                f"(needs {allowed})")

    # --- create and attest -------------------------------------------------------------

    def create_tee(self, manifest: JobManifest, party_certificates,
                   resume: ResumePoint | None = None) -> None:
        """Check the manifest (its SXP configuration included) and the parties'
        certificates, write the manifest's whole SXP configuration, enter trusted mode (the
        SXP checks the configuration; :class:`TrustedModeError` if it refuses, or if it
        was trusted already), read the configuration back, measure the trusted-mode bit
        and the tile bootloader, and sign the attestation report, whose manifest hash
        covers the configuration as read back.

        *party_certificates* is a sequence (list, tuple, any iterable but bytes and str)
        of DER bytes or :class:`cryptography.x509.Certificate`, one per party of the
        manifest. Errors, all raised before the port sees a call:
        :class:`ApiOrderError` (not READY, or the device is not provisioned);
        :class:`ManifestError` (*manifest* is not a :class:`JobManifest`, or
        :meth:`JobManifest.validate` refuses it; *resume* is not None or a
        :class:`ResumePoint` of ints, or out of the u32 range);
        :class:`PartyCertificateError` (*party_certificates* is not a sequence, an entry
        is neither DER bytes nor a certificate, does not parse, a party has no
        certificate, a key is not P-384, or a certificate belongs to no party);
        :class:`TrustedModeError` (the SXP was trusted already). After the writes, the SXP
        refusing trusted mode raises :class:`TrustedModeError`, the state stays READY."""
        self._require("create_tee", TeeState.READY)
        if not isinstance(manifest, JobManifest):
            raise ManifestError(f"the manifest is a {type(manifest).__name__}, not a JobManifest")
        manifest.validate()
        if resume is not None and not (
                isinstance(resume, ResumePoint) and _is_int(resume.epoch) and _is_int(resume.checkpoint_id)):
            raise ManifestError(f"resume point {resume!r} is not a ResumePoint of two ints")
        if resume is not None and not (0 <= resume.epoch < 0xFFFFFFFF
                                       and 0 <= resume.checkpoint_id <= 0xFFFFFFFF):
            raise ManifestError(f"resume point {resume} is out of the u32 range")
        if self._certs.cik_certificate is None:
            raise ApiOrderError("create_tee() before the device was provisioned "
                                "(no CIK certificate)")
        party_keys = self._party_public_keys(manifest, party_certificates)
        if self._port.trusted_mode():
            raise TrustedModeError("the SXP is already in trusted mode: its configuration "
                                   "is locked and was not written by this CCU (reset the "
                                   "device)")
        # All checks passed: from here on nothing can fail on the host's input. The whole
        # configuration goes in BEFORE trusted mode, so the SXP's consistency check sees
        # what it will run (and a trusted SXP refuses configuration writes).
        for c in manifest.config_writes():
            self._port.write_config(c.register, c.index, c.value)
        self._port.set_trusted_mode()
        # The bit as the hardware reports it, not as requested.
        if not self._port.trusted_mode():
            raise TrustedModeError("the SXP refused trusted mode (exception CONFIG): its "
                                   "configuration is not the manifest's consistent one; "
                                   "nothing is attested or launched")
        # The configuration as the SXP holds it now (locked): the report binds this copy,
        # not the manifest's, through the manifest hash (sw.ccu.manifest).
        live = {(r, i): self._port.read_config(r, i) for r, i in config_entries()}
        self._store.extend("cce", SLOT_CONFIG, config_measurement(True))
        self._store.extend("cce", SLOT_TILE_BOOTLOADER, measure(self._tile_bootloader))
        if self._cc_mode is not None:
            self._store.extend("cce", SLOT_CC_MODE, cc_mode_measurement(self._cc_mode()))
        self._manifest, self._party_keys, self._resume = manifest, party_keys, resume
        self._epoch = 0 if resume is None else resume.epoch + 1
        self._checkpoint_id = 0 if resume is None else resume.checkpoint_id
        self._ecdh = ec.generate_private_key(ec.SECP384R1())
        report = AttestationReport(
            manifest.job_id, manifest.hash(live), self._epoch, self._checkpoint_id,
            self._store.values(),
            tuple((p.party_id, p.fingerprint) for p in manifest.parties),
            self._ecdh.public_key().public_bytes(serialization.Encoding.X962,
                                                 serialization.PublicFormat.UncompressedPoint))
        signed = sign_report(report, self._ak)
        self._report_hash = report_hash(report.encode())
        der = serialization.Encoding.DER
        self._evidence = AttestationEvidence(signed, tuple(
            c.public_bytes(der) for c in (self._certs.cik_certificate,
                                          self._certs.pik_certificate,
                                          self._certs.ak_certificate)))
        self.state = TeeState.CREATED

    @staticmethod
    def _party_public_keys(manifest, party_certificates):
        if party_certificates is None or isinstance(party_certificates, (bytes, bytearray, str)):
            entries = None
        else:
            try:
                entries = list(party_certificates)
            except TypeError:
                entries = None
        if entries is None:
            raise PartyCertificateError(f"party_certificates is a {type(party_certificates).__name__}: "
                                        "need a sequence of certificates, one per party")
        by_fp = {}
        for c in entries:
            if isinstance(c, (bytes, bytearray)):
                try:
                    cert = x509.load_der_x509_certificate(bytes(c))
                except ValueError as e:
                    raise PartyCertificateError(f"a party certificate does not parse: {e}") \
                        from None
            elif not isinstance(c, x509.Certificate):
                raise PartyCertificateError(f"a party certificate is a {type(c).__name__}, "
                                            "neither DER bytes nor an x509.Certificate")
            else:
                cert = c
            by_fp[certs.fingerprint(cert)] = cert
        keys = {}
        for p in manifest.parties:
            cert = by_fp.pop(p.fingerprint, None)
            if cert is None:
                raise PartyCertificateError(f"no certificate with party {p.party_id}'s "
                                            f"fingerprint {p.fingerprint[:8].hex()}…")
            if not certs.is_p384(cert.public_key()):
                raise PartyCertificateError(f"party {p.party_id}'s key is not P-384")
            keys[p.party_id] = cert.public_key()
        if by_fp:
            raise PartyCertificateError(f"{len(by_fp)} certificate(s) belong to no party "
                                        "of the manifest")
        return keys

    def get_attestation_report(self) -> AttestationEvidence:
        self._require("get_attestation_report", *_LIVE)
        return self._evidence

    # --- key exchange ------------------------------------------------------------------

    def submit_key_package(self, package: bytes) -> int:
        """Unwrap one party's package; returns the party id. A later package of the same
        party (higher counter) replaces the earlier one."""
        self._require("submit_key_package", TeeState.CREATED)
        m = self._manifest
        header, ciphertext = parse_header(package)
        if header.job_id != m.job_id:
            raise WrongJobError(f"key package is for job {header.job_id.hex()}, this TEE "
                                f"runs job {m.job_id.hex()}")
        entry = m.party(header.party_id)
        if entry is None:
            raise WrongPartyError(f"key package from party {header.party_id}, which is not "
                                  f"in job {m.job_id.hex()} (parties "
                                  f"{[p.party_id for p in m.parties]})")
        if header.report_hash != self._report_hash:
            raise StaleReportError(f"key package is bound to report "
                                   f"{header.report_hash[:8].hex()}…, this TEE's report is "
                                   f"{self._report_hash[:8].hex()}…")
        last = self._packages.get(header.party_id, (0,))[0]
        if header.counter <= last:
            raise ReplayedPackageError(f"party {header.party_id} package counter "
                                       f"{header.counter} is not above {last}: replayed")
        z = self._ecdh.exchange(ec.ECDH(), self._party_keys[header.party_id])
        c = open_package(header, ciphertext, z)
        if (c.job_id, c.party_id, c.counter) != (header.job_id, header.party_id,
                                                 header.counter):
            raise MalformedPackageError("key package plaintext disagrees with its header")
        stray = [k for k, _ in c.keys if k not in entry.key_ids]
        if stray:
            raise UnexpectedKeyError(f"party {c.party_id} supplied key id(s) {stray}, which "
                                     f"the manifest does not assign to it")
        if (c.resume_nonce is not None) != (self._resume is not None):
            raise ResumeError(f"party {c.party_id}: " + (
                "this run resumes from a checkpoint but the package has no resume nonce"
                if self._resume else "this run is fresh but the package has a resume nonce"))
        old = self._packages.get(c.party_id)
        if old is not None:
            self._scrub_package(old)
        self._packages[c.party_id] = (
            c.counter, bytearray(c.nonce),
            None if c.resume_nonce is None else bytearray(c.resume_nonce),
            {k: bytearray(v) for k, v in c.keys})
        return c.party_id

    @staticmethod
    def _scrub_package(pkg):
        _, nonce, resume, keys = pkg
        zeroize(nonce)
        zeroize(resume)
        for v in keys.values():
            zeroize(v)

    # --- launch and run ------------------------------------------------------------------

    def launch(self) -> LaunchInfo:
        """Derive the run keys and install key set 0 (the SXP was configured and locked by
        :meth:`create_tee`); the ECDH key and the nonces are scrubbed (nothing needs them
        any more). The tiles then run the tile bootloader (state BOOTING) until
        :meth:`start_main`."""
        self._require("launch", TeeState.CREATED)
        m = self._manifest
        missing = [p.party_id for p in m.parties if p.party_id not in self._packages]
        if missing:
            raise IncompleteKeysError(f"no key package yet from party {missing}")
        supplied = {k for pkg in self._packages.values() for k in pkg[3]}
        needed = {k.key_id for ks in m.key_sets for k in ks} - {
            KEY_CHECKPOINT, KEY_RESUME_CHECKPOINT, KEY_FINAL_MODEL}
        if needed - supplied:
            raise IncompleteKeysError(f"scheduled key ids {sorted(needed - supplied)} were "
                                      "supplied by no package")
        if not self._port.trusted_mode():
            raise TrustedModeError("the SXP's trusted-mode bit reads clear: no key is "
                                   "installed while the host can still program the SXP")
        keys = {k: v for pkg in self._packages.values() for k, v in pkg[3].items()}
        nonces = [pkg[1] for pkg in self._packages.values()]
        keys[KEY_CHECKPOINT] = checkpoint_key(nonces, m.job_id, self._epoch)
        keys[KEY_FINAL_MODEL] = final_model_key(nonces, m.job_id, self._epoch)
        if self._resume is not None:
            keys[KEY_RESUME_CHECKPOINT] = checkpoint_key(
                [pkg[2] for pkg in self._packages.values()], m.job_id, self._resume.epoch)
        for pkg in self._packages.values():     # keys moved to self._keys; nonces die
            zeroize(pkg[1])
            zeroize(pkg[2])
        self._packages = {pid: (pkg[0], None, None, {}) for pid, pkg in self._packages.items()}
        self._ecdh = self._party_keys = None
        self._keys = keys
        self._install(0)
        self.state = TeeState.BOOTING
        return LaunchInfo(self._tile_bootloader, self._epoch, self._checkpoint_id)

    def start_main(self, measurement: bytes) -> None:
        """The tile bootloader's measurement of the binary it loaded (the combined 48-byte
        SHA-384 the manifest's ``binary_measurement`` holds): main execution may start only
        if it is the manifest's. Otherwise the TEE is stopped (tiles held, keys zeroed,
        secrets scrubbed, the event logged with source MEASUREMENT) and
        :class:`BinaryMeasurementError` raised."""
        self._require("start_main", TeeState.BOOTING)
        want = self._manifest.binary_measurement
        got = bytes(measurement) if isinstance(measurement, (bytes, bytearray)) else b""
        if len(got) == len(want) and hmac.compare_digest(got, want):
            self.state = TeeState.RUNNING
            return
        self._stop(ExceptionCause(ExceptionSource.MEASUREMENT), None)
        raise BinaryMeasurementError(
            f"the loaded binary measures {got[:8].hex()}… ({len(got)} bytes), the "
            f"manifest's is {want[:8].hex()}…: main execution refused, TEE stopped")

    def _install(self, index):
        for k in self._manifest.key_sets[index]:
            key = self._keys.get(k.key_id)
            if key is None:          # resume-checkpoint key in a fresh run: nothing to load
                continue
            self._port.install_key(k.phys_ctx, bytes(key))
            self._installed.add(k.phys_ctx)
        self._next_set = index + 1

    def next_key_set(self) -> int:
        """At a synchronisation point: install the next key set; returns its index."""
        self._require("next_key_set", TeeState.RUNNING)       # sync points are in main
        if self._next_set >= len(self._manifest.key_sets):
            raise ScheduleExhaustedError(f"all {len(self._manifest.key_sets)} key sets of "
                                         "the manifest are installed")
        self._install(self._next_set)
        return self._next_set - 1

    def terminate(self) -> None:
        """Overwrite every key context this TEE used with zeros and scrub every secret,
        the AK included: only a device reset (which boots a new CCE) leads on. From
        STOPPED there is nothing left to scrub: it only moves to TERMINATED."""
        self._require("terminate", *_LIVE, TeeState.STOPPED)
        self._zero_contexts()
        self.scrub()
        self.state = TeeState.TERMINATED

    def _zero_contexts(self):
        for ctx in sorted(self._installed):
            self._port.install_key(ctx, bytes(KEY_SIZE))

    # --- exceptions ------------------------------------------------------------------------

    def on_exception(self, cause: ExceptionCause | None = None, *,
                     time: int | None = None) -> ExceptionEvent | None:
        """The exception pin. Reads the cause record through the port (unless *cause* is
        given), logs it and, if a TEE is CREATED, BOOTING or RUNNING, stops the job: the
        tiles are held, every key context the TEE used is zeroed, every secret (run keys,
        packages, ECDH key, AK) is scrubbed and the state becomes STOPPED, where create,
        launch, start_main, key and report calls are refused. In READY, TERMINATED and
        STOPPED the event is only logged. Returns the logged event (None if the pin was
        spurious: no cause latched)."""
        if cause is None:
            cause = self._port.read_exception()
            if cause is None:
                return None
        if not isinstance(cause, ExceptionCause):
            raise TypeError(f"{cause!r} is not an ExceptionCause")
        return self._stop(cause, time)

    def _stop(self, cause: ExceptionCause, time) -> ExceptionEvent:
        live = self.state in _LIVE
        event = ExceptionEvent(len(self._log) + 1, cause, self.state,
                               self._manifest.job_id if self._manifest else None, live, time)
        self._log.append(event)
        if live:
            self._port.hold_tiles()          # first: the tiles stop using the keys
            self._zero_contexts()
            self.scrub()
            self.state = TeeState.STOPPED
        return event

    @property
    def exception_log(self) -> tuple[ExceptionEvent, ...]:
        """Every exception the CCU saw (this boot and earlier ones on the same device)."""
        return tuple(self._log)

    def scrub(self) -> None:
        """Drop every secret (also called by the device reset)."""
        for pkg in self._packages.values():
            if pkg[1] is not None:
                self._scrub_package(pkg)
        for v in self._keys.values():
            zeroize(v)
        self._ak = None
        self._clear_tee()
