"""The CCU's trusted port into the SXP, as an abstract interface.

The CCU firmware model talks to the SXPs only through :class:`SxpKeyPort`, three calls:

- ``set_trusted_mode()`` — set the trusted-mode bit; from then on only this port may write
  keys or configuration (the host port is locked out until a chip reset).
- ``write_config(register, index, value)`` — one entry of a key-mapping register
  (:class:`SxpRegister`: KXBCTXMAP and KPHYSMAP have 16 entries, KSELLIMIT base/limit 17).
- ``install_key(phys_ctx, key)`` — a 32-byte AES-256 key into physical context 0..15
  (write-only in hardware: there is no read-back call on purpose).

A later issue binds the interface to the RTL's CCU CSR port; :class:`RecordingSxpPort` is
the in-memory implementation the tests use. The chip reset is a wire, not a port call:
the recording port's :meth:`RecordingSxpPort.reset` models it and is called by the device.
"""
import enum
from typing import Protocol, runtime_checkable

__all__ = ["SxpRegister", "REGISTER_ENTRIES", "PHYS_CONTEXTS", "KEY_SIZE", "SxpKeyPort",
           "RecordingSxpPort"]

PHYS_CONTEXTS = 16
KEY_SIZE = 32


class SxpRegister(enum.IntEnum):
    KXBCTXMAP = 0          # exchange-block context -> physical key context
    KPHYSMAP = 1           # physical key context -> key region 1..16
    KSELLIMIT_BASE = 2     # key region -> first byte of tile PCI space
    KSELLIMIT_LIMIT = 3    # key region -> first byte past the region


REGISTER_ENTRIES = {SxpRegister.KXBCTXMAP: 16, SxpRegister.KPHYSMAP: 16,
                    SxpRegister.KSELLIMIT_BASE: 17, SxpRegister.KSELLIMIT_LIMIT: 17}


@runtime_checkable
class SxpKeyPort(Protocol):
    def install_key(self, phys_ctx: int, key: bytes) -> None: ...
    def set_trusted_mode(self) -> None: ...
    def write_config(self, register: SxpRegister, index: int, value: int) -> None: ...


class RecordingSxpPort:
    """Records every call in ``log`` and keeps the resulting SXP state (``keys``,
    ``config``, ``trusted``). Argument errors raise ValueError: the CCU must never make
    them, so a test that sees one has found a CCU bug."""

    def __init__(self):
        self.reset()

    def reset(self):
        """Chip reset: keys scrubbed, trusted mode off, configuration cleared."""
        self.log: list[tuple] = []
        self.keys: dict[int, bytes] = {}
        self.config: dict[tuple[SxpRegister, int], int] = {}
        self.trusted = False

    def install_key(self, phys_ctx: int, key: bytes) -> None:
        if not 0 <= phys_ctx < PHYS_CONTEXTS or len(key) != KEY_SIZE:
            raise ValueError(f"bad key install: context {phys_ctx}, {len(key)} bytes")
        self.keys[phys_ctx] = bytes(key)
        self.log.append(("key", phys_ctx, bytes(key)))

    def set_trusted_mode(self) -> None:
        self.trusted = True
        self.log.append(("trusted",))

    def write_config(self, register: SxpRegister, index: int, value: int) -> None:
        register = SxpRegister(register)
        if not 0 <= index < REGISTER_ENTRIES[register] or not 0 <= value < 1 << 64:
            raise ValueError(f"bad config write: {register.name}[{index}] = {value}")
        self.config[register, index] = value
        self.log.append(("config", register, index, value))
