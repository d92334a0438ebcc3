"""Job manifest: the parties, their keys, the key schedule and the SXP configuration.

Every party holds the same manifest; the report carries its hash (SHA-384 of
:meth:`JobManifest.encode`), so a party can tell the CCU runs *its* job. Encoding (all
integers big-endian, ``uN`` = N-bit unsigned)::

    "ITXM" u8 version=1  job_id[16]  binary_measurement[48]
    u16 n_parties  { u16 party_id  fingerprint[48]  u16 n  { u16 key_id }*n }*   (ascending ids)
    u16 n_sets     { u16 n  { u8 phys_ctx  u16 key_id }*n }*
    u16 n_config   { u8 register  u8 index  u64 value }*

Key set 0 is installed by ``launch()``, set *i* at the *i*-th synchronisation point.
Key ids 0xFFF0-0xFFF2 name the keys the CCU derives itself (:data:`DERIVED_KEYS`).
"""
import hashlib
import struct
from dataclasses import dataclass

from .errors import ManifestError
from .sxp_port import PHYS_CONTEXTS, REGISTER_ENTRIES, SxpRegister

__all__ = ["KEY_CHECKPOINT", "KEY_RESUME_CHECKPOINT", "KEY_FINAL_MODEL", "DERIVED_KEYS",
           "PartyEntry", "KeyInstall", "ConfigWrite", "JobManifest", "JOB_ID_SIZE"]

JOB_ID_SIZE = 16
KEY_CHECKPOINT = 0xFFF0         # this run's checkpoint key (epoch e)
KEY_RESUME_CHECKPOINT = 0xFFF1  # the resumed run's checkpoint key (epoch e-1); skipped if fresh
KEY_FINAL_MODEL = 0xFFF2        # this run's final-model key
DERIVED_KEYS = {KEY_CHECKPOINT: "checkpoint", KEY_RESUME_CHECKPOINT: "resume-checkpoint",
                KEY_FINAL_MODEL: "final-model"}


@dataclass(frozen=True)
class PartyEntry:
    party_id: int
    fingerprint: bytes          # SHA-384 of the party's certificate (DER)
    key_ids: tuple[int, ...]    # the stream keys this party supplies


@dataclass(frozen=True)
class KeyInstall:
    phys_ctx: int
    key_id: int


@dataclass(frozen=True)
class ConfigWrite:
    register: SxpRegister
    index: int
    value: int


@dataclass(frozen=True)
class JobManifest:
    job_id: bytes
    binary_measurement: bytes
    parties: tuple[PartyEntry, ...]
    key_sets: tuple[tuple[KeyInstall, ...], ...]
    sxp_config: tuple[ConfigWrite, ...] = ()

    def encode(self) -> bytes:
        self.validate()
        out = [b"ITXM\x01", self.job_id, self.binary_measurement,
               struct.pack(">H", len(self.parties))]
        for p in self.parties:
            out += [struct.pack(">H", p.party_id), p.fingerprint,
                    struct.pack(f">H{len(p.key_ids)}H", len(p.key_ids), *p.key_ids)]
        out.append(struct.pack(">H", len(self.key_sets)))
        for ks in self.key_sets:
            out.append(struct.pack(">H", len(ks)))
            out += [struct.pack(">BH", k.phys_ctx, k.key_id) for k in ks]
        out.append(struct.pack(">H", len(self.sxp_config)))
        out += [struct.pack(">BBQ", c.register, c.index, c.value) for c in self.sxp_config]
        return b"".join(out)

    def hash(self) -> bytes:
        return hashlib.sha384(self.encode()).digest()

    def party(self, party_id: int) -> PartyEntry | None:
        return next((p for p in self.parties if p.party_id == party_id), None)

    def owner_of(self, key_id: int) -> int | None:
        return next((p.party_id for p in self.parties if key_id in p.key_ids), None)

    def validate(self) -> None:
        """ManifestError naming the first inconsistency."""
        def bad(msg):
            raise ManifestError(msg)
        if len(self.job_id) != JOB_ID_SIZE:
            bad(f"job id is {len(self.job_id)} bytes, need {JOB_ID_SIZE}")
        if len(self.binary_measurement) != 48:
            bad("binary measurement is not a 48-byte SHA-384 digest")
        if not self.parties:
            bad("a job needs at least one party")
        ids = [p.party_id for p in self.parties]
        if ids != sorted(set(ids)) or not all(0 <= i < 1 << 16 for i in ids):
            bad(f"party ids {ids} are not unique, ascending u16 values")
        owned = {}
        for p in self.parties:
            if len(p.fingerprint) != 48:
                bad(f"party {p.party_id}: fingerprint is not 48 bytes")
            for k in p.key_ids:
                if k in DERIVED_KEYS or not 0 <= k < 1 << 16:
                    bad(f"party {p.party_id}: key id {k:#x} is reserved or out of range")
                if k in owned:
                    bad(f"key id {k} is claimed by parties {owned[k]} and {p.party_id}")
                owned[k] = p.party_id
        if not self.key_sets:
            bad("the key schedule needs at least the launch key set")
        for i, ks in enumerate(self.key_sets):
            ctxs = [k.phys_ctx for k in ks]
            if len(set(ctxs)) != len(ctxs) or not all(0 <= c < PHYS_CONTEXTS for c in ctxs):
                bad(f"key set {i}: contexts {ctxs} repeat or exceed {PHYS_CONTEXTS - 1}")
            for k in ks:
                if k.key_id not in owned and k.key_id not in DERIVED_KEYS:
                    bad(f"key set {i}: key id {k.key_id} is supplied by no party")
        for c in self.sxp_config:
            if c.register not in REGISTER_ENTRIES or \
                    not 0 <= c.index < REGISTER_ENTRIES[SxpRegister(c.register)] or \
                    not 0 <= c.value < 1 << 64:
                bad(f"config write {c} is out of range")
