"""A small register-map helper in the style of amaranth-soc (which is not installable here).

- :class:`Access`, :class:`Field`, :class:`Register`, :class:`RegisterMap` — typed fields
  with access modes (R, W, RW, W1C, WO), registers at byte addresses, and Markdown / JSON
  documentation generated from the map (:meth:`RegisterMap.markdown`, :meth:`RegisterMap.to_json`).
- :class:`Signature` — the CSR bus (``addr``, ``r_stb``, ``r_data``, ``w_stb``, ``w_data``).
- :class:`Bridge` — decodes a map onto one bus port, with a write-permission hook.
- :class:`RegisterFile` — the fields' storage behind one bridge per named port.

See docs/csr.md.
"""
from .bus import Bridge, FieldPort, RegisterFile, Signature
from .regmap import Access, Field, Register, RegisterMap

__all__ = ["Access", "Field", "Register", "RegisterMap", "Signature", "Bridge", "FieldPort",
           "RegisterFile"]
