"""The ICU's register map on the CCU's ``icu`` port of ``itx_device`` (the table in docs/itx.md is
generated from it by ``python -m scripts.gen_docs``)."""
from hw.csr import Access, Field, Register, RegisterMap
from hw.pcie.layout import TAG_BITS
from hw.pcie.layout import Cause as RdCause

__all__ = ["icu_register_map"]

R, W, W1C = Access.R, Access.W, Access.W1C


def icu_register_map():
    causes = ", ".join(f"{c.value} {c.name}" for c in RdCause)
    return RegisterMap("icu", registers=[
        Register(0x00, "ICU_STATUS", "Link and pin state", [
            Field("link_ready", 1, R, desc="the reset scrub is over: the host link (host CSR "
                  "port, PCIe streams) and the tiles' port are open"),
            Field("hold", 1, R, desc="the tiles are held (HOLD written), until the next reset"),
            Field("sxp_exc", 1, R, desc="the SXP's exception is latched (its STATUS.exc on the "
                  "`ccu` port holds the cause)"),
        ]),
        Register(0x04, "RD_EVENTS", "PCIe read-table security events (drive `exc`)", [
            Field("bad_cpl", 1, W1C, desc="a completion was dropped, or repaired (FRAMING) (RD_ERR); "
                  "write 1 to clear"),
            Field("timeout", 1, W1C, offset=1,
                  desc="a read timed out (RD_TIMEOUT); write 1 to clear"),
        ]),
        Register(0x08, "RD_ERR", "Last dropped or repaired completion", [
            Field("tag", TAG_BITS, R, desc="its PCIe tag"),
            Field("cause", 3, R, offset=8, desc=f"why ({causes})"),
        ]),
        Register(0x0C, "RD_TIMEOUT", "Last timed-out read", [
            Field("tag", TAG_BITS, R, desc="its PCIe tag"),
        ]),
        Register(0x10, "HOLD", "Hold the tiles", [
            Field("hold", 1, W, desc="write 1: the tiles stop (`hold` pin) and their port "
                  "closes until the next reset"),
        ]),
    ], data_width=32, desc="ICU registers of itx_device (hw/itx/regs.py), CCU only.")
