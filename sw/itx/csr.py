"""The SXP's CSR registers behind the shim's two abstract interfaces, on top of the SXP's
own CSR driver (:mod:`sw.sxp.driver`: addresses, key words and the trust bit are defined
there and in :mod:`hw.sxp.regs`, not here).

- :class:`CsrConfigWriter` — ``write(register, index, value)`` (what
  :meth:`sw.itx.runtime.Runtime.configure` calls) as CSR writes on a port: bind it to the
  host port of the golden model (``sw.sxp.driver.ModelBus(model, "host")``) or of the RTL.
  Entries an SXP with fewer contexts does not have (KPHYSMAP beyond ``contexts``) are
  skipped and counted.
- :class:`CsrKeyPort` — :class:`sw.ccu.sxp_port.CcuPort` over the ``ccu`` port:
  :class:`sw.sxp.driver.SxpCsrDriver` for the writes, plus an optional ``wait_key_idle()``
  before each KEY_COMMIT (the RTL ignores a commit while STATUS.key_busy is set; a cocotb
  bus polls STATUS there). With a ``read32`` it also reads the trusted-mode bit, the
  exception record (STATUS, EXC_ADDR, EXC_TILE; the record is acknowledged by writing
  STATUS.exc = 1) and the configuration (``read_config``: an entry as the SXP holds it;
  None for a KPHYSMAP entry beyond ``contexts``, which this SXP does not have) back, and
  with a ``hold`` callable it holds the tiles — the seven calls :class:`sw.ccu.cce.Cce`
  needs. Used on the golden model's ``ccu`` port and, through
  :class:`tb.system.env.RtlCcuPort`, on the RTL's. The SXP checks the configuration
  before trusted mode takes effect, a few cycles after the CTRL.trust write: with a
  ``read32``, :meth:`CsrKeyPort.set_trusted_mode` returns only once STATUS says trusted or
  an exception is latched (at most :data:`TRUST_POLLS` reads), so the CCU's read-back of
  the bit sees the outcome, not the request in flight.
"""
from sw.ccu.sxp_port import ExceptionCause, ExceptionSource, SxpRegister
from sw.sxp.driver import SxpCsrDriver, key_writes, register_address

__all__ = ["CsrConfigWriter", "CsrKeyPort", "status_fields", "TRUST_POLLS"]

TRUST_POLLS = 64        # STATUS reads allowed for a CTRL.trust request to resolve


def status_fields(regmap, value, register="STATUS"):
    """A register's value (STATUS by default) → dict of its fields."""
    return {f.name: (value >> f.offset) & ((1 << f.width) - 1) for f in regmap[register].fields}


class CsrConfigWriter:
    def __init__(self, write32, contexts=16):
        self.write32, self.contexts, self.skipped = write32, contexts, 0

    def __call__(self, register, index, value):
        if SxpRegister(register) is SxpRegister.KPHYSMAP and index >= self.contexts:
            self.skipped += 1
            return
        self.write32(register_address(register, index), value)


class CsrKeyPort(SxpCsrDriver):
    def __init__(self, write32, contexts=16, wait_key_idle=None, read32=None, hold=None):
        super().__init__(write32)
        self.contexts, self.wait_key_idle = contexts, wait_key_idle
        self._config = CsrConfigWriter(write32, contexts)
        self._read32, self._hold = read32, hold
        from hw.sxp.regs import register_map
        self._regmap = register_map(contexts)

    def _fields(self, register):
        if self._read32 is None:
            raise TypeError(f"this CsrKeyPort was built without read32: it cannot read {register}")
        return status_fields(self._regmap, self._read32(self._regmap[register].addr), register)

    def _status(self):
        return self._fields("STATUS")

    def set_trusted_mode(self):
        super().set_trusted_mode()
        if self._read32 is None:
            return
        for _ in range(TRUST_POLLS):
            st = self._status()
            if st["trusted"] or st["exc"]:
                return
        raise TimeoutError(f"CTRL.trust unresolved after {TRUST_POLLS} STATUS reads: {st}")

    def trusted_mode(self):
        return bool(self._status()["trusted"])

    def read_exception(self):
        st = self._status()
        if not st["exc"]:
            return None
        cause = ExceptionCause(ExceptionSource.SXP, code=st["cause"],
                               address=self._read32(self._regmap["EXC_ADDR"].addr),
                               tile=self._fields("EXC_TILE")["tile"])
        self._write(self._regmap["STATUS"].addr, 1)          # STATUS.exc is write-1-to-clear
        return cause

    def hold_tiles(self):
        if self._hold is None:
            raise TypeError("this CsrKeyPort was built without hold: it cannot hold the tiles")
        self._hold()

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

    def read_config(self, register, index):
        """The entry as the SXP holds it now; None for a KPHYSMAP entry beyond
        ``contexts`` (the SXP has no such register). TypeError without a ``read32``."""
        register = SxpRegister(register)
        if register is SxpRegister.KPHYSMAP and index >= self.contexts:
            return None
        if self._read32 is None:
            raise TypeError("this CsrKeyPort was built without read32: it cannot read the configuration")
        return self._read32(register_address(register, index))
