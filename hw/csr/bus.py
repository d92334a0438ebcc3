"""The CSR bus, the per-port :class:`Bridge` that decodes a register map onto it, and the
:class:`RegisterFile` that keeps the fields' storage behind one bridge per port."""
from amaranth.hdl import Cat, Const, Module, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .regmap import Access, RegisterMap

__all__ = ["Signature", "Bridge", "FieldPort", "RegisterFile"]


class Signature(wiring.Signature):
    """A simple CSR bus, seen from the initiator.

    - ``addr`` (``addr_width``): byte address of the register.
    - ``w_stb``, ``w_data``: a write of ``w_data`` to ``addr`` when ``w_stb`` is high; it
      takes effect at that clock edge.
    - ``r_stb``, ``r_data``: a read of ``addr`` when ``r_stb`` is high; ``r_data`` holds the
      value from the cycle after ``r_stb`` until the next read. Reads have no side effects.
    """

    def __init__(self, addr_width, data_width=32):
        if isinstance(addr_width, bool) or not isinstance(addr_width, int) or addr_width < 1:
            raise ValueError(f"addr_width must be a positive int, not {addr_width!r}")
        self.addr_width, self.data_width = addr_width, data_width
        super().__init__({
            "addr": Out(addr_width),
            "r_stb": Out(1),
            "r_data": In(data_width),
            "w_stb": Out(1),
            "w_data": Out(data_width),
        })

    def __eq__(self, other):
        return (isinstance(other, Signature) and self.addr_width == other.addr_width and
                self.data_width == other.data_width)

    def __repr__(self):
        return f"csr.Signature({self.addr_width}, {self.data_width})"


class Bridge(wiring.Component):
    """Decodes *regmap* onto one CSR bus port.

    Besides the ``bus`` port it has, per register name: ``read[name]`` (the value to
    return, driven by whoever owns the storage) and ``write[name]`` (a one-cycle strobe: a
    permitted write to that register, data in ``w_data``). ``denied`` pulses when an access
    to a mapped register is refused by *write_allowed* or *read_allowed*.

    *write_allowed* and *read_allowed*, if given, are called once per register at elaboration
    as ``hook(register)`` and return ``True``/``False`` or a 1-bit Amaranth value: the
    per-port permission hooks (e.g. ``~trusted`` on a host port). A refused write changes
    nothing; a refused read returns zero.
    """

    def __init__(self, regmap, write_allowed=None, read_allowed=None):
        if not isinstance(regmap, RegisterMap):
            raise TypeError(f"regmap must be a RegisterMap, not {regmap!r}")
        for name, hook in (("write_allowed", write_allowed), ("read_allowed", read_allowed)):
            if hook is not None and not callable(hook):
                raise TypeError(f"{name} must be callable or None")
        self.regmap = regmap
        self._write_allowed, self._read_allowed = write_allowed, read_allowed
        super().__init__({"bus": In(Signature(regmap.addr_width, regmap.data_width))})
        self.read = {r.name: Signal(regmap.data_width, name=f"{r.name}_rd") for r in regmap}
        self.write = {r.name: Signal(name=f"{r.name}_wr") for r in regmap}
        self.w_data = Signal(regmap.data_width)
        self.denied = Signal()

    def elaborate(self, platform):
        m = Module()
        bus = self.bus
        m.d.comb += self.w_data.eq(bus.w_data)
        read = Const(0, self.regmap.data_width)
        denied = []
        for r in self.regmap:
            hit = Signal(name=f"{r.name}_sel")
            m.d.comb += hit.eq(bus.addr == r.addr)
            allowed = _permission(self._write_allowed, r)
            m.d.comb += self.write[r.name].eq(bus.w_stb & hit & allowed)
            denied.append(bus.w_stb & hit & ~allowed)
            select = hit
            if self._read_allowed is not None:
                readable = _permission(self._read_allowed, r)
                denied.append(bus.r_stb & hit & ~readable)
                select = hit & readable
            read = read | (self.read[r.name] & select.replicate(self.regmap.data_width))
        m.d.comb += self.denied.eq(Cat(denied).any())
        with m.If(bus.r_stb):
            m.d.sync += bus.r_data.eq(read)
        return m


def _permission(hook, register):
    allowed = True if hook is None else hook(register)
    return Const(int(allowed), 1) if isinstance(allowed, bool) else Value.cast(allowed)


class FieldPort:
    """The hardware side of one field; which signals exist depends on the access mode:
    ``r`` (R: drive it), ``q`` (RW, WO, W1C: the stored value), ``set`` (W1C: drive 1s to
    set bits), ``data`` and ``stb`` (W: the written value and its one-cycle strobe)."""

    def __init__(self, reg, field):
        self.field = field
        name = f"{reg.name}_{field.name}"
        a = field.access
        if a is Access.R:
            self.r = Signal(field.width, name=f"{name}_r")
        if a.stored:
            self.q = Signal(field.width, init=field.reset, name=f"{name}_q")
        if a is Access.W1C:
            self.set = Signal(field.width, name=f"{name}_set")
        if a is Access.W:
            self.data = Signal(field.width, name=f"{name}_data")
            self.stb = Signal(name=f"{name}_stb")


class RegisterFile(wiring.Component):
    """The storage of a register map behind one :class:`Bridge` per CSR port.

    Parameters
    ----------
    regmap : RegisterMap
    ports : sequence of str
        Names of the CSR ports (each an ``In(Signature)`` member of this component). When
        two ports write the same register in the same cycle, the one listed first wins.
    write_allowed, read_allowed : dict {port: hook} or None
        Per-port write and read permission hooks, called at elaboration as
        ``hook(register_file, register)`` and returning a bool or a 1-bit value. A refused
        write changes nothing, a refused read returns zero; both pulse the bridge's
        ``denied``.

    ``rf["REG"]["field"]`` (or ``rf.field("REG", "field")``) is the field's
    :class:`FieldPort`; ``rf.bridges[port]`` the port's bridge (e.g. its ``denied`` pulse).
    """

    def __init__(self, regmap, ports=("bus",), write_allowed=None, read_allowed=None):
        if not isinstance(regmap, RegisterMap):
            raise TypeError(f"regmap must be a RegisterMap, not {regmap!r}")
        ports = list(ports)
        if not ports or len(set(ports)) != len(ports) or not all(isinstance(p, str) and p.isidentifier()
                                                                  for p in ports):
            raise ValueError(f"ports must be distinct identifiers, not {ports!r}")
        hooks = {}
        for name, given in (("write_allowed", write_allowed), ("read_allowed", read_allowed)):
            hooks[name] = dict(given or {})
            if set(hooks[name]) - set(ports):
                raise ValueError(f"{name} names unknown ports {set(hooks[name]) - set(ports)}")
        self.regmap, self.ports = regmap, ports
        super().__init__({p: In(Signature(regmap.addr_width, regmap.data_width)) for p in ports})
        self._fields = {r.name: {f.name: FieldPort(r, f) for f in r.fields} for r in regmap}

        def bind(hook):
            return None if hook is None else (lambda reg: hook(self, reg))
        self.bridges = {p: Bridge(regmap, **{name: bind(h.get(p)) for name, h in hooks.items()})
                        for p in ports}

    def __getitem__(self, register):
        return self._fields[register]

    def field(self, register, field):
        return self._fields[register][field]

    def elaborate(self, platform):
        m = Module()
        for p in self.ports:
            m.submodules[f"bridge_{p}"] = bridge = self.bridges[p]
            wiring.connect(m, wiring.flipped(getattr(self, p)), bridge.bus)
        for r in self.regmap:
            # read value: the readable fields at their offsets
            value = Const(0, self.regmap.data_width)
            for f in r.fields:
                port = self._fields[r.name][f.name]
                if f.access is Access.R:
                    value = value | (port.r.as_unsigned() << f.offset)
                elif f.access.readable:
                    value = value | (port.q << f.offset)
            for p in self.ports:
                m.d.comb += self.bridges[p].read[r.name].eq(value)
            for f in r.fields:
                port = self._fields[r.name][f.name]
                sl = slice(f.offset, f.offset + f.width)
                # later statements win: go through the ports from the last to the first
                if f.access in (Access.RW, Access.WO):
                    for p in reversed(self.ports):
                        b = self.bridges[p]
                        with m.If(b.write[r.name]):
                            m.d.sync += port.q.eq(b.w_data[sl])
                elif f.access is Access.W:
                    m.d.comb += port.stb.eq(Cat(self.bridges[p].write[r.name] for p in self.ports).any())
                    for p in reversed(self.ports):
                        b = self.bridges[p]
                        with m.If(b.write[r.name]):
                            m.d.comb += port.data.eq(b.w_data[sl])
                elif f.access is Access.W1C:
                    clear = Const(0, f.width)
                    for p in self.ports:
                        b = self.bridges[p]
                        clear = clear | (b.w_data[sl] & b.write[r.name].replicate(f.width))
                    m.d.sync += port.q.eq((port.q & ~clear) | port.set)
        return m
