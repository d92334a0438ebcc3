"""Register maps: typed fields with access modes, registers at byte addresses, and the
Markdown / JSON documentation generated from them (docs/csr.md)."""
import enum
import json

__all__ = ["Access", "Field", "Register", "RegisterMap"]


class Access(enum.Enum):
    """How the bus and the hardware see a field."""
    R = "R"        # read-only: the hardware drives the value (``.r``); writes ignored
    W = "W"        # write strobe: a write pulses ``.stb`` for one cycle with ``.data``; reads 0
    RW = "RW"      # storage (``.q``), written by the bus, read back
    W1C = "W1C"    # sticky status (``.q``): the hardware sets bits (``.set``), writing 1 clears
    WO = "WO"      # write-only storage (``.q``): the hardware sees it, the bus reads zero (keys)

    @property
    def readable(self):
        return self in (Access.R, Access.RW, Access.W1C)

    @property
    def writable(self):
        return self is not Access.R

    @property
    def stored(self):
        return self in (Access.RW, Access.W1C, Access.WO)


class Field:
    """A field of *width* bits. *offset* defaults to just above the previous field."""

    def __init__(self, name, width, access, *, reset=0, desc="", offset=None):
        if not isinstance(name, str) or not name.isidentifier():
            raise TypeError(f"field name must be an identifier, not {name!r}")
        if isinstance(width, bool) or not isinstance(width, int) or width < 1:
            raise ValueError(f"field {name}: width must be a positive int, not {width!r}")
        if not isinstance(access, Access):
            raise TypeError(f"field {name}: access must be an Access, not {access!r}")
        if isinstance(reset, bool) or not isinstance(reset, int) or not 0 <= reset < (1 << width):
            raise ValueError(f"field {name}: reset {reset!r} does not fit in {width} bits")
        if reset and not access.stored:
            raise ValueError(f"field {name}: a {access.value} field has no reset value")
        self.name, self.width, self.access, self.reset, self.desc = name, width, access, reset, desc
        self.offset = offset

    @property
    def bits(self):
        hi = self.offset + self.width - 1
        return f"{hi}:{self.offset}" if self.width > 1 else f"{self.offset}"

    def __repr__(self):
        return f"Field({self.name!r}, {self.width}, {self.access.value}, offset={self.offset})"


class Register:
    """A register of *fields* at byte address *addr*."""

    def __init__(self, addr, name, desc, fields):
        if isinstance(addr, bool) or not isinstance(addr, int) or addr < 0:
            raise ValueError(f"register {name}: address must be a non-negative int, not {addr!r}")
        if not isinstance(name, str) or not name.isidentifier():
            raise TypeError(f"register name must be an identifier, not {name!r}")
        fields = list(fields)
        if not fields or not all(isinstance(f, Field) for f in fields):
            raise TypeError(f"register {name}: fields must be a non-empty list of Field")
        self.addr, self.name, self.desc = addr, name, desc
        offset = 0
        names = set()
        for f in fields:
            if f.name in names:
                raise ValueError(f"register {name}: two fields named {f.name}")
            names.add(f.name)
            if f.offset is None:
                f.offset = offset
            offset = f.offset + f.width
        self.fields = sorted(fields, key=lambda f: f.offset)
        for a, b in zip(self.fields, self.fields[1:]):
            if a.offset + a.width > b.offset:
                raise ValueError(f"register {name}: fields {a.name} and {b.name} overlap")
        self.width = self.fields[-1].offset + self.fields[-1].width

    def field(self, name):
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(f"register {self.name} has no field {name}")

    @property
    def reset(self):
        return sum(f.reset << f.offset for f in self.fields)

    def __repr__(self):
        return f"Register({self.addr:#x}, {self.name!r}, {self.fields})"


class RegisterMap:
    """Named registers of *data_width* bits at byte addresses (multiples of data_width/8).

    ``addr_width`` (bus address bits, byte addressing) defaults to the fewest that reach
    every register."""

    def __init__(self, name, registers, *, data_width=32, addr_width=None, desc=""):
        if data_width not in (8, 16, 32, 64):
            raise ValueError(f"data_width must be 8, 16, 32 or 64, not {data_width!r}")
        self.name, self.data_width, self.desc = name, data_width, desc
        self.registers = sorted(registers, key=lambda r: r.addr)
        step = data_width // 8
        seen = {}
        for r in self.registers:
            if not isinstance(r, Register):
                raise TypeError(f"not a Register: {r!r}")
            if r.addr % step:
                raise ValueError(f"register {r.name}: address {r.addr:#x} not a multiple of {step}")
            if r.width > data_width:
                raise ValueError(f"register {r.name}: {r.width} bits do not fit in {data_width}")
            if r.name in seen.values():
                raise ValueError(f"two registers named {r.name}")
            if r.addr in seen:
                raise ValueError(f"registers {seen[r.addr]} and {r.name} share address {r.addr:#x}")
            seen[r.addr] = r.name
        need = max(1, (max((r.addr for r in self.registers), default=0) + step - 1).bit_length())
        if addr_width is None:
            addr_width = need
        elif addr_width < need:
            raise ValueError(f"addr_width {addr_width} cannot reach address {max(seen):#x}")
        self.addr_width = addr_width

    def __iter__(self):
        return iter(self.registers)

    def __getitem__(self, name):
        for r in self.registers:
            if r.name == name:
                return r
        raise KeyError(f"no register {name} in {self.name}")

    # ------------------------------------------------------------------ documentation
    def as_dict(self):
        return {
            "name": self.name, "desc": self.desc, "data_width": self.data_width,
            "addr_width": self.addr_width, "addressing": "byte",
            "registers": [{
                "addr": r.addr, "name": r.name, "desc": r.desc, "reset": r.reset,
                "fields": [{"name": f.name, "offset": f.offset, "width": f.width,
                            "access": f.access.value, "reset": f.reset, "desc": f.desc}
                           for f in r.fields],
            } for r in self.registers],
        }

    def to_json(self):
        return json.dumps(self.as_dict(), indent=1) + "\n"

    def markdown(self, heading="###"):
        """The register map as Markdown: a summary table, then one field table per register."""
        digits = max(2, (self.addr_width + 3) // 4)
        hexa = lambda v: f"0x{v:0{digits}x}"  # noqa: E731
        lines = [f"{heading} Register map `{self.name}`", ""]
        if self.desc:
            lines += [self.desc, ""]
        lines += [f"{self.data_width}-bit registers at byte addresses ({self.addr_width}-bit bus "
                  f"address). Access: R read-only, W write strobe (reads 0), RW read/write, "
                  f"W1C write 1 to clear, WO write-only (reads 0).", "",
                  "| Address | Register | Reset | Description |", "|---|---|---|---|"]
        for r in self.registers:
            lines.append(f"| {hexa(r.addr)} | {r.name} | 0x{r.reset:08x} | {r.desc} |")
        for r in self.registers:
            lines += ["", f"{heading}# {hexa(r.addr)} {r.name}", "",
                      "| Bits | Field | Access | Reset | Description |", "|---|---|---|---|---|"]
            for f in reversed(r.fields):
                reset = hex(f.reset) if f.access.stored else "—"
                lines.append(f"| {f.bits} | {f.name} | {f.access.value} | {reset} | {f.desc} |")
        return "\n".join(lines) + "\n"
