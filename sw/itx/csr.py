"""The SXP's CSR registers behind the shim's two abstract interfaces, on top of the SXP's
own CSR driver (:mod:`sw.sxp.driver`: addresses, key words and the trust bit are defined
there and in :mod:`hw.sxp.regs`, not here).

- :class:`CsrConfigWriter` — ``write(register, index, value)`` (what
  :meth:`sw.itx.runtime.Runtime.configure` calls) as CSR writes on a port: bind it to the
  host port of the golden model (``sw.sxp.driver.ModelBus(model, "host")``) or of the RTL.
  Entries an SXP with fewer contexts does not have (KPHYSMAP beyond ``contexts``) are
  skipped and counted.
- :class:`CsrKeyPort` — :class:`sw.ccu.sxp_port.SxpKeyPort` over the ``ccu`` port:
  :class:`sw.sxp.driver.SxpCsrDriver`, plus an optional ``wait_key_idle()`` before each
  KEY_COMMIT (the RTL ignores a commit while STATUS.key_busy is set; a cocotb bus polls
  STATUS there).
"""
from sw.ccu.sxp_port import SxpRegister
from sw.sxp.driver import SxpCsrDriver, key_writes, register_address

__all__ = ["CsrConfigWriter", "CsrKeyPort", "status_fields"]


def status_fields(regmap, value):
    """STATUS register value → dict of its fields."""
    return {f.name: (value >> f.offset) & ((1 << f.width) - 1) for f in regmap["STATUS"].fields}


class CsrConfigWriter:
    def __init__(self, write32, contexts=16):
        self.write32, self.contexts, self.skipped = write32, contexts, 0

    def __call__(self, register, index, value):
        if SxpRegister(register) is SxpRegister.KPHYSMAP and index >= self.contexts:
            self.skipped += 1
            return
        self.write32(register_address(register, index), value)


class CsrKeyPort(SxpCsrDriver):
    def __init__(self, write32, contexts=16, wait_key_idle=None):
        super().__init__(write32)
        self.contexts, self.wait_key_idle = contexts, wait_key_idle
        self._config = CsrConfigWriter(write32, contexts)

    def install_key(self, phys_ctx, key):
        if not 0 <= phys_ctx < self.contexts:
            raise ValueError(f"no physical context {phys_ctx} (the SXP has {self.contexts})")
        writes = key_writes(phys_ctx, bytes(key))
        for addr, value in writes[:-1]:
            self._write(addr, value)
        if self.wait_key_idle is not None:
            self.wait_key_idle()
        self._write(*writes[-1])

    def write_config(self, register, index, value):
        self._config(register, index, value)
