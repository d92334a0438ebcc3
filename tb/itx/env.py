"""The CCU's port on ``itx_device``: the SXP's registers (``ccu``) as on sxp_system, plus the
ICU's (``icu``): the PCIe read table's events in the cause record, and the hold."""
from cocotb.task import resume

from sw.ccu.sxp_port import ExceptionCause, ExceptionSource
from sw.itx.csr import status_fields
from tb.common.csr import CsrBus
from tb.system.env import RtlCcuPort

__all__ = ["ItxCcuPort"]


class ItxCcuPort(RtlCcuPort):
    """:class:`tb.system.env.RtlCcuPort` on itx_device: ``read_exception`` reports the
    SXP's exception first, then a dropped completion, then a timed-out read (each
    acknowledged where it is latched); ``hold_tiles`` writes ICU HOLD (the ``hold`` pin)
    and halts the testbench's tile models."""

    def __init__(self, tb, icu_regmap):
        super().__init__(tb)
        self.icu_regmap = icu_regmap
        self.icu = CsrBus(tb.dut, "icu", tb.clk)
        self._icu_read = resume(self.icu.read)
        self._icu_write = resume(self.icu.write)
        self._tb_hold = tb.hold

    def _icu_fields(self, name):
        return status_fields(self.icu_regmap, self._icu_read(self.icu_regmap[name].addr), name)

    def read_exception(self):
        if self._icu_fields("ICU_STATUS")["sxp_exc"]:
            return super().read_exception()
        events = self._icu_fields("RD_EVENTS")
        ack = self.icu_regmap["RD_EVENTS"].addr
        if events["bad_cpl"]:
            rec = self._icu_fields("RD_ERR")
            self._icu_write(ack, 1)
            return ExceptionCause(ExceptionSource.BAD_COMPLETION, code=rec["cause"], tag=rec["tag"])
        if events["timeout"]:
            rec = self._icu_fields("RD_TIMEOUT")
            self._icu_write(ack, 2)
            return ExceptionCause(ExceptionSource.COMPLETION_TIMEOUT, tag=rec["tag"])
        return None

    def hold_tiles(self):
        self._icu_write(self.icu_regmap["HOLD"].addr, 1)
        self._tb_hold()
