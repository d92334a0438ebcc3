"""The CCU's trusted port into the device (the SXP's CCU CSR port plus the CCU's own pins),
as an abstract interface.

The CCU firmware model reaches the hardware only through :class:`CcuPort`, seven calls:

Key installation (:class:`SxpKeyPort`, the first three; write-only):

- ``set_trusted_mode()`` — request the trusted-mode bit (SXP ``CTRL.trust``); from then
  on only this port may install keys, and nobody may change the configuration (the host
  port is locked out until a chip reset). The SXP may refuse (an inconsistent
  configuration raises its CONFIG exception), so the CCU does not assume the bit: it reads
  it with ``trusted_mode()``.
- ``write_config(register, index, value)`` — one entry of a key-mapping register
  (:class:`SxpRegister`: KXBCTXMAP and KPHYSMAP have 16 entries, KSELLIMIT base/limit 17),
  accepted only outside trusted mode: the CCU writes the whole configuration before it
  requests trusted mode, so the SXP's consistency check sees the configuration it runs.
- ``install_key(phys_ctx, key)`` — a 32-byte AES-256 key into physical context 0..15
  (write-only in hardware: there is no read-back call on purpose).

Status and exceptions (the other four):

- ``read_config(register, index) -> int | None`` — the entry as the SXP holds it now
  (None: this SXP does not have the entry, e.g. KPHYSMAP beyond its contexts). The CCU
  reads the whole configuration back after entering trusted mode and binds what it read
  into the attestation report.
- ``trusted_mode() -> bool`` — the trusted-mode bit as the hardware reports it now
  (SXP ``STATUS.trusted``). The CCU measures this value into the attestation report and
  refuses ``launch()`` while it reads False.
- ``hold_tiles() -> None`` — hold every tile (stop the job): the tiles execute nothing
  more and issue no more traffic until the chip reset, which releases them. Idempotent.
- ``read_exception() -> ExceptionCause | None`` — the cause record latched with the
  exception pin (the SXP's security exceptions and the PCIe read table's bad-completion and
  completion-timeout events, merged), and acknowledge it (the pin drops unless another
  event is pending); None when nothing is latched.

The exception *pin* is a wire, not a call: whoever watches it (the cocotb adapter, the
tests) calls :meth:`sw.ccu.cce.Cce.on_exception`, which reads the cause through
``read_exception()``. The chip reset is a wire as well: :meth:`RecordingSxpPort.reset`
models it and is called by the device.

:class:`RecordingSxpPort` is the in-memory implementation the tests use; a port that only
installs keys (``SxpKeyPort``) is not enough for :class:`~sw.ccu.cce.Cce` any more.
"""
import enum
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

__all__ = ["SxpRegister", "REGISTER_ENTRIES", "REGISTER_WIDTHS", "REGIONS", "PHYS_CONTEXTS",
           "KEY_SIZE", "CAUSE_CONFIG", "reset_value", "config_entries", "config_problem",
           "SxpKeyPort", "CcuPort", "ExceptionSource", "ExceptionCause", "RecordingSxpPort",
           "PORT_METHODS"]

PHYS_CONTEXTS = 16
REGIONS = PHYS_CONTEXTS + 1    # key regions: 0 cleartext, 1..16 one per physical context
KEY_SIZE = 32
CAUSE_CONFIG = 7               # the SXP's exception cause for a refused CTRL.trust (hw.sxp.regs.Cause)


class SxpRegister(enum.IntEnum):
    KXBCTXMAP = 0          # exchange-block context -> physical key context
    KPHYSMAP = 1           # physical key context -> key region 1..16
    KSELLIMIT_BASE = 2     # key region -> first byte of tile PCI space
    KSELLIMIT_LIMIT = 3    # key region -> first byte past the region


REGISTER_ENTRIES = {SxpRegister.KXBCTXMAP: 16, SxpRegister.KPHYSMAP: 16,
                    SxpRegister.KSELLIMIT_BASE: 17, SxpRegister.KSELLIMIT_LIMIT: 17}
# Bits of each entry (docs/registers.md): a physical context, a region id, a tile PCI
# address. A value that does not fit is not a configuration: the SXP would keep its low bits.
REGISTER_WIDTHS = {SxpRegister.KXBCTXMAP: 4, SxpRegister.KPHYSMAP: 5,
                   SxpRegister.KSELLIMIT_BASE: 32, SxpRegister.KSELLIMIT_LIMIT: 32}


def reset_value(register, index):
    """An entry's value out of reset: KPHYSMAP maps context p to region p + 1, everything
    else is 0 (every region empty)."""
    return index + 1 if SxpRegister(register) is SxpRegister.KPHYSMAP else 0


def config_entries():
    """Every (register, index) of the configuration, in register then index order."""
    return tuple((r, i) for r in SxpRegister for i in range(REGISTER_ENTRIES[r]))


def config_problem(config) -> str | None:
    """What makes *config* ({(register, index): value} over :func:`config_entries`; None
    for an entry the SXP does not have) a configuration the SXP refuses trusted mode on, or
    None if it is consistent (docs/sxp.md, *Registers and trusted mode*): every KPHYSMAP
    entry a region 1..16 and no region named twice, the 17 regions [base, limit) pairwise
    disjoint (an empty region, limit <= base, overlaps nothing). Checked over all 16
    KPHYSMAP entries that are present."""
    phys = {i: v for (r, i), v in config.items() if r is SxpRegister.KPHYSMAP and v is not None}
    for p, region in sorted(phys.items()):
        if not 1 <= region < REGIONS:
            return f"KPHYSMAP[{p}] = {region} is not a key region 1..{REGIONS - 1}"
    owner = {}
    for p, region in sorted(phys.items()):
        if region in owner:
            return f"KPHYSMAP[{owner[region]}] and KPHYSMAP[{p}] both map to region {region}"
        owner[region] = p
    spans = [(config.get((SxpRegister.KSELLIMIT_BASE, r)) or 0,
              config.get((SxpRegister.KSELLIMIT_LIMIT, r)) or 0) for r in range(REGIONS)]
    for a in range(REGIONS):
        for b in range(a + 1, REGIONS):
            (ba, la), (bb, lb) = spans[a], spans[b]
            if ba < la and bb < lb and ba < lb and bb < la:
                return (f"region {a} [{ba:#x}, {la:#x}) overlaps region {b} [{bb:#x}, {lb:#x})"
                        + (" (the cleartext region)" if a == 0 else ""))
    return None


class ExceptionSource(enum.Enum):
    """Who raised an exception that reached the CCU."""
    SXP = "sxp"                                # SXP security exception (STATUS.cause)
    BAD_COMPLETION = "bad-completion"          # PCIe read table dropped a completion
    COMPLETION_TIMEOUT = "completion-timeout"  # PCIe read table: a completion never came
    MEASUREMENT = "measurement"                # the CCU itself: start_main() refused the binary
    TILE = "tile"                              # a tile's own check (the bootloader's IV
                                               # check) reported to the CCU; ``tile`` names it


@dataclass(frozen=True)
class ExceptionCause:
    """One cause record. ``code`` is the source's own cause number (``hw.sxp.regs.Cause``
    for SXP, ``hw.pcie.layout.Cause`` for a bad completion, 0 otherwise); ``address`` and
    ``tile`` the offending packet's tile PCI address and tile (SXP ``EXC_ADDR``,
    ``EXC_TILE``); ``tag`` the PCIe tag (bad completion, timeout). Unused fields are 0."""
    source: ExceptionSource
    code: int = 0
    address: int = 0
    tile: int = 0
    tag: int = 0

    def __post_init__(self):
        if not isinstance(self.source, ExceptionSource):
            raise TypeError(f"exception source {self.source!r} is not an ExceptionSource")
        for name in ("code", "address", "tile", "tag"):
            v = getattr(self, name)
            v = getattr(v, "value", v)           # an enum member (hw Cause) is its code
            if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < 1 << 64:
                raise ValueError(f"exception cause field {name}={v!r} is not a u64")
            object.__setattr__(self, name, v)


@runtime_checkable
class SxpKeyPort(Protocol):
    """Key installation only (what the CCU writes)."""
    def install_key(self, phys_ctx: int, key: bytes) -> None: ...
    def set_trusted_mode(self) -> None: ...
    def write_config(self, register: SxpRegister, index: int, value: int) -> None: ...


@runtime_checkable
class CcuPort(SxpKeyPort, Protocol):
    """Everything the CCU firmware model uses: key installation, the configuration and the
    trusted-mode bit as read back, holding the tiles and reading the exception cause."""
    def read_config(self, register: SxpRegister, index: int) -> int | None: ...
    def trusted_mode(self) -> bool: ...
    def hold_tiles(self) -> None: ...
    def read_exception(self) -> ExceptionCause | None: ...


PORT_METHODS = ("set_trusted_mode", "write_config", "install_key", "read_config",
                "trusted_mode", "hold_tiles", "read_exception")


class RecordingSxpPort:
    """Records every call with an effect in ``log`` and keeps the resulting state (``keys``,
    ``config``, ``trusted``, ``held``, the latched exceptions). Argument errors raise
    ValueError: the CCU must never make them, so a test that sees one has found a CCU bug.
    A configuration write in trusted mode is one (the SXP refuses it).

    Like the SXP, ``set_trusted_mode()`` enters trusted mode only on a consistent
    configuration (:func:`config_problem`); otherwise the bit stays clear and a CONFIG
    exception is latched. :meth:`host_write` is the untrusted host's CSR port (refused and
    counted in ``denied`` once trusted).

    Test knobs: ``refuse_trusted = True`` makes ``set_trusted_mode()`` refuse whatever the
    configuration; :meth:`raise_exception` latches a cause record and raises the pin
    (:attr:`irq`)."""

    def __init__(self):
        self.refuse_trusted = False
        self.reset()

    def reset(self):
        """Chip reset: keys scrubbed, trusted mode off, configuration to its reset values,
        tiles released, latched exceptions dropped."""
        self.log: list[tuple] = []
        self.keys: dict[int, bytes] = {}
        self.config: dict[tuple[SxpRegister, int], int] = {e: reset_value(*e) for e in config_entries()}
        self.trusted = False
        self.held = False
        self.denied = 0
        self._pending: list[ExceptionCause] = []

    # --- SxpKeyPort ------------------------------------------------------------------------

    def install_key(self, phys_ctx: int, key: bytes) -> None:
        if not 0 <= phys_ctx < PHYS_CONTEXTS or len(key) != KEY_SIZE:
            raise ValueError(f"bad key install: context {phys_ctx}, {len(key)} bytes")
        self.keys[phys_ctx] = bytes(key)
        self.log.append(("key", phys_ctx, bytes(key)))

    def set_trusted_mode(self) -> None:
        self.log.append(("trusted",))
        if self.trusted:
            return
        if self.refuse_trusted or config_problem(self.config) is not None:
            self.raise_exception(ExceptionCause(ExceptionSource.SXP, code=CAUSE_CONFIG))
        else:
            self.trusted = True

    def write_config(self, register: SxpRegister, index: int, value: int) -> None:
        register = self._check_entry(register, index, value)
        if self.trusted:
            raise ValueError(f"{register.name}[{index}] written in trusted mode: the SXP "
                             "refuses configuration writes once trusted")
        self.config[register, index] = value
        self.log.append(("config", register, index, value))

    @staticmethod
    def _check_entry(register, index, value):
        register = SxpRegister(register)
        if not 0 <= index < REGISTER_ENTRIES[register] or isinstance(value, bool) or \
                not isinstance(value, int) or not 0 <= value < 1 << REGISTER_WIDTHS[register]:
            raise ValueError(f"bad config write: {register.name}[{index}] = {value!r}")
        return register

    def host_write(self, register: SxpRegister, index: int, value: int) -> bool:
        """The host's CSR port: a configuration write, refused (False, counted in
        ``denied``) in trusted mode."""
        register = self._check_entry(register, index, value)
        if self.trusted:
            self.denied += 1
            return False
        self.config[register, index] = value
        return True

    # --- status and exceptions -------------------------------------------------------------

    def read_config(self, register: SxpRegister, index: int) -> int | None:
        register = SxpRegister(register)
        if not 0 <= index < REGISTER_ENTRIES[register]:
            raise ValueError(f"{register.name} has no entry {index}")
        return self.config[register, index]

    def trusted_mode(self) -> bool:
        return self.trusted

    def hold_tiles(self) -> None:
        self.held = True
        self.log.append(("hold",))

    def read_exception(self) -> ExceptionCause | None:
        if not self._pending:
            return None
        cause = self._pending.pop(0)
        self.log.append(("exception-ack", cause))
        return cause

    # --- the hardware side (tests) -----------------------------------------------------------

    def raise_exception(self, cause: ExceptionCause) -> None:
        """An exception event: latch *cause* and raise the pin."""
        if not isinstance(cause, ExceptionCause):
            raise TypeError(f"{cause!r} is not an ExceptionCause")
        self._pending.append(cause)

    @property
    def irq(self) -> bool:
        """The exception pin: high while a cause is latched and not yet read."""
        return bool(self._pending)
