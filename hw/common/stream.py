"""Stream stages."""
from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["SkidBuffer"]


class SkidBuffer(wiring.Component):
    """A full-throughput register stage that cuts every combinational path between its
    sides: ``i.ready`` is a register (it does not depend on ``o.ready``) and ``o`` is driven
    from a register.

    Two entries: the output register and a skid register that catches the beat accepted in
    the cycle ``o`` stalled. One beat per cycle passes while ``o.ready`` stays high; latency
    one cycle. *reset_less*: the data registers have no reset (their valid bits do).
    """

    def __init__(self, shape, *, reset_less=True):
        self._shape = shape
        self._reset_less = reset_less
        super().__init__({
            "i": In(stream.Signature(shape)),
            "o": Out(stream.Signature(shape)),
        })

    def elaborate(self, platform):
        m = Module()
        main_valid, skid_valid = Signal(), Signal()
        main = Signal(self._shape, reset_less=self._reset_less)
        skid = Signal(self._shape, reset_less=self._reset_less)
        m.d.comb += [
            self.i.ready.eq(~skid_valid),
            self.o.valid.eq(main_valid),
            self.o.payload.eq(main),
        ]
        take = self.i.valid & ~skid_valid
        with m.If(~main_valid | self.o.ready):
            # the output register is free after this cycle: refill it, skid first
            m.d.sync += [main_valid.eq(skid_valid | self.i.valid),
                         main.eq(Mux(skid_valid, skid, self.i.payload)),
                         skid_valid.eq(0)]
        with m.Elif(take):
            m.d.sync += [skid_valid.eq(1), skid.eq(self.i.payload)]
        return m
