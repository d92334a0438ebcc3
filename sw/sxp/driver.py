"""Register-level driver: binds the CCU's :class:`sw.ccu.sxp_port.SxpKeyPort` (``install_key``,
``set_trusted_mode``, ``write_config``) onto SXP CSR writes.

:class:`SxpCsrDriver` takes a ``write(addr, value)`` callable. Against the golden model:
``SxpCsrDriver(ModelBus(model, "ccu"))``. Against the RTL in cocotb, which needs awaiting,
:class:`QueuedBus` collects the writes and the testbench plays them on the CSR port
(``await tb.csr_writes(bus.take())``): the async adapter.
"""
from hw.sxp.regs import (
    ADDR_KEY,
    ADDR_KEY_COMMIT,
    ADDR_KPHYSMAP,
    ADDR_KSEL_BASE,
    ADDR_KSEL_LIMIT,
    ADDR_KXBCTXMAP,
    KEY_WORDS,
)
from sw.ccu.sxp_port import KEY_SIZE, PHYS_CONTEXTS, REGISTER_ENTRIES, SxpRegister

__all__ = ["SxpCsrDriver", "ModelBus", "QueuedBus", "register_address", "key_writes"]

_BASES = {SxpRegister.KXBCTXMAP: ADDR_KXBCTXMAP, SxpRegister.KPHYSMAP: ADDR_KPHYSMAP,
          SxpRegister.KSELLIMIT_BASE: ADDR_KSEL_BASE, SxpRegister.KSELLIMIT_LIMIT: ADDR_KSEL_LIMIT}
CTRL, CTRL_TRUST = 0x000, 1


def register_address(register, index):
    """Byte address of entry *index* of *register* (:class:`SxpRegister`)."""
    register = SxpRegister(register)
    if not 0 <= index < REGISTER_ENTRIES[register]:
        raise ValueError(f"{register.name} has no entry {index}")
    return _BASES[register] + 4 * index


def key_writes(phys_ctx, key: bytes):
    """The CSR writes that install *key* in *phys_ctx*: 8 staging words, then the commit."""
    if not 0 <= phys_ctx < PHYS_CONTEXTS or len(key) != KEY_SIZE:
        raise ValueError(f"bad key install: context {phys_ctx}, {len(key)} bytes")
    words = [(ADDR_KEY + 4 * k, int.from_bytes(key[4 * k:4 * k + 4], "little"))
             for k in range(KEY_WORDS)]
    return words + [(ADDR_KEY_COMMIT, phys_ctx)]


class SxpCsrDriver:
    """:class:`SxpKeyPort` over a CSR ``write(addr, value)`` callable."""

    def __init__(self, write):
        if not callable(write):
            raise TypeError("write must be callable")
        self._write = write

    def install_key(self, phys_ctx: int, key: bytes) -> None:
        for addr, value in key_writes(phys_ctx, bytes(key)):
            self._write(addr, value)

    def set_trusted_mode(self) -> None:
        self._write(CTRL, CTRL_TRUST)

    def write_config(self, register: SxpRegister, index: int, value: int) -> None:
        if not 0 <= value < 1 << 32:
            raise ValueError(f"{SxpRegister(register).name}[{index}] = {value} is not 32-bit")
        self._write(register_address(register, index), value)


class ModelBus:
    """``write`` onto a :class:`sw.sxp.model.SxpModel` CSR port."""

    def __init__(self, model, port="ccu"):
        self.model, self.port = model, port

    def __call__(self, addr, value):
        self.model.csr_write(self.port, addr, value)


class QueuedBus:
    """Collects writes; ``take()`` hands them to an async player (cocotb)."""

    def __init__(self):
        self.writes = []

    def __call__(self, addr, value):
        self.writes.append((addr, value))

    def take(self):
        writes, self.writes = self.writes, []
        return writes
