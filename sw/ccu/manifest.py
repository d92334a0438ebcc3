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

SXP configuration: ``sxp_config`` names entries; every entry it does not name keeps its
reset value (:func:`~sw.ccu.sxp_port.reset_value`), so the manifest fixes the whole
configuration (:meth:`JobManifest.configuration`), and ``create_tee`` writes all of it
(:meth:`JobManifest.config_writes`) before it requests trusted mode: nothing the host
programmed earlier survives. :meth:`JobManifest.validate` refuses, before anything is
written, a value wider than its register and a configuration the SXP's consistency check
would refuse (two contexts on one region, overlapping regions, a KPHYSMAP entry that is no
key region).

The report's manifest hash is :meth:`JobManifest.hash` with ``live_config``, the
configuration the CCU read back from the SXP after entering trusted mode: the ``n_config``
entries are the manifest's own with the values read back, followed by every entry the
manifest does not name that reads back other than its reset value (register and index
ascending). An entry the SXP does not have reads back None: encoded with bit 7 of its
register byte set and value 0 when the manifest names it, left out when it is a KPHYSMAP
entry the manifest does not name (an SXP with fewer than 16 contexts has no such
register); any other entry missing is encoded with the mark. So it equals the plain manifest hash exactly when the
live configuration is the manifest's, and a relying party checking the manifest hash
checks the live configuration too.
"""
import hashlib
import struct
from dataclasses import dataclass

from .errors import ManifestError
from .sxp_port import (
    PHYS_CONTEXTS,
    REGISTER_ENTRIES,
    REGISTER_WIDTHS,
    SxpRegister,
    config_entries,
    config_problem,
    reset_value,
)

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

    def encode(self, live_config: dict | None = None) -> bytes:
        """The manifest encoding; with *live_config* ({(register, index): value or None}
        as read back from the SXP) the configuration section describes that configuration
        instead (module docstring)."""
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
        entries = [(c.register, c.index, c.value) for c in self.sxp_config]
        if live_config is not None:
            named = {(SxpRegister(r), i) for r, i, _ in entries}
            entries = [(r, i, live_config.get((SxpRegister(r), i))) for r, i, _ in entries]
            entries += [(r, i, v) for (r, i), v in ((e, live_config.get(e)) for e in config_entries())
                        if (r, i) not in named and v != reset_value(r, i)
                        and not (v is None and r is SxpRegister.KPHYSMAP)]
        out.append(struct.pack(">H", len(entries)))
        out += [struct.pack(">BBQ", r, i, v) if v is not None else struct.pack(">BBQ", r | 0x80, i, 0)
                for r, i, v in entries]
        return b"".join(out)

    def hash(self, live_config: dict | None = None) -> bytes:
        """SHA-384 of :meth:`encode` (of the configuration *live_config* if given)."""
        return hashlib.sha384(self.encode(live_config)).digest()

    def configuration(self) -> dict:
        """The whole SXP configuration this manifest fixes: {(register, index): value} over
        every entry, the manifest's value or the reset value."""
        self.validate()
        return self._configuration()

    def _configuration(self):
        config = {e: reset_value(*e) for e in config_entries()}
        config.update({(SxpRegister(c.register), c.index): c.value for c in self.sxp_config})
        return config

    def config_writes(self) -> tuple[ConfigWrite, ...]:
        """What the CCU writes before trusted mode: every entry of :meth:`configuration`,
        register then index order."""
        return tuple(ConfigWrite(r, i, v) for (r, i), v in self.configuration().items())

    def party(self, party_id: int) -> PartyEntry | None:
        return next((p for p in self.parties if p.party_id == party_id), None)

    def owner_of(self, key_id: int) -> int | None:
        return next((p.party_id for p in self.parties if key_id in p.key_ids), None)

    def validate(self) -> None:
        """ManifestError naming the first inconsistency, checked before anything else
        reads the manifest: a field of the wrong type (``job_id``, ``binary_measurement``
        and fingerprints are ``bytes``; ids, contexts, registers, indices and values
        ``int``, not bool; ``parties``, ``key_sets``, a key set, ``key_ids`` and
        ``sxp_config`` tuples or lists of :class:`PartyEntry`, :class:`KeyInstall`,
        ``int`` and :class:`ConfigWrite`), a size or range, a duplicate, a key no party
        supplies, or a configuration the SXP refuses. Nothing else is raised, so
        :meth:`encode`, :meth:`hash`, :meth:`configuration` and :meth:`config_writes`,
        which validate first, raise ManifestError too."""
        def bad(msg):
            raise ManifestError(msg)

        def sequence(value, what):
            if not isinstance(value, (tuple, list)):
                bad(f"{what} is a {type(value).__name__}, not a tuple")
            return value
        for name in ("job_id", "binary_measurement"):
            value = getattr(self, name)
            if not isinstance(value, bytes):
                bad(f"{name} is a {type(value).__name__}, not bytes")
        if len(self.job_id) != JOB_ID_SIZE:
            bad(f"job id is {len(self.job_id)} bytes, need {JOB_ID_SIZE}")
        if len(self.binary_measurement) != 48:
            bad("binary measurement is not a 48-byte SHA-384 digest")
        if not sequence(self.parties, "parties"):
            bad("a job needs at least one party")
        for p in self.parties:
            if not isinstance(p, PartyEntry):
                bad(f"party entry {p!r} is not a PartyEntry")
            if not _is_int(p.party_id):
                bad(f"party id {p.party_id!r} is not an int")
        ids = [p.party_id for p in self.parties]
        if ids != sorted(set(ids)) or not all(0 <= i < 1 << 16 for i in ids):
            bad(f"party ids {ids} are not unique, ascending u16 values")
        owned = {}
        for p in self.parties:
            if not isinstance(p.fingerprint, bytes) or len(p.fingerprint) != 48:
                bad(f"party {p.party_id}: fingerprint is not 48 bytes")
            for k in sequence(p.key_ids, f"party {p.party_id}: key_ids"):
                if not _is_int(k):
                    bad(f"party {p.party_id}: key id {k!r} is not an int")
                if k in DERIVED_KEYS or not 0 <= k < 1 << 16:
                    bad(f"party {p.party_id}: key id {k:#x} is reserved or out of range")
                if k in owned:
                    bad(f"key id {k} is claimed by parties {owned[k]} and {p.party_id}")
                owned[k] = p.party_id
        if not sequence(self.key_sets, "key_sets"):
            bad("the key schedule needs at least the launch key set")
        for i, ks in enumerate(self.key_sets):
            for k in sequence(ks, f"key set {i}"):
                if not isinstance(k, KeyInstall):
                    bad(f"key set {i}: {k!r} is not a KeyInstall")
                if not _is_int(k.phys_ctx) or not _is_int(k.key_id):
                    bad(f"key set {i}: {k} has a context or key id that is not an int")
            ctxs = [k.phys_ctx for k in ks]
            if len(set(ctxs)) != len(ctxs) or not all(0 <= c < PHYS_CONTEXTS for c in ctxs):
                bad(f"key set {i}: contexts {ctxs} repeat or exceed {PHYS_CONTEXTS - 1}")
            for k in ks:
                if k.key_id not in owned and k.key_id not in DERIVED_KEYS:
                    bad(f"key set {i}: key id {k.key_id} is supplied by no party")
        named = set()
        for c in sequence(self.sxp_config, "sxp_config"):
            if not isinstance(c, ConfigWrite):
                bad(f"config entry {c!r} is not a ConfigWrite")
            if not _is_int(c.register) or c.register not in REGISTER_ENTRIES:
                bad(f"config write {c}: no SXP register {c.register!r}")
            reg = SxpRegister(c.register)
            if not _is_int(c.index) or not 0 <= c.index < REGISTER_ENTRIES[reg]:
                bad(f"config write {c}: {reg.name} has no entry {c.index!r}")
            width = REGISTER_WIDTHS[reg]
            if not _is_int(c.value) or not 0 <= c.value < 1 << width:
                bad(f"config write {reg.name}[{c.index}] = {c.value!r} does not fit the "
                    f"register's {width} bits")
            if (reg, c.index) in named:
                bad(f"config entry {reg.name}[{c.index}] is written twice")
            named.add((reg, c.index))
        problem = config_problem(self._configuration())
        if problem is not None:
            bad(f"SXP configuration: {problem} (the SXP refuses trusted mode on it)")


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)
