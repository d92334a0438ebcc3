"""Run in NVIDIA's venv (sim_build/nvenv) by test_nvidia_evidence.py, as ``python -c`` with
its text (this directory's verifier.py would shadow NVIDIA's package): NVIDIA's RIM code
on a RIM file — ``verifier.rim.RIM`` parses it and validates it against the SWID schema,
and ``signxml.XMLVerifier`` (the library NVIDIA's ``RIM.verify_signature`` calls) checks
its signature to a given root. argv: RIM path, root PEM path. Prints one JSON line."""
import json
import sys

from lxml import etree
from signxml import XMLVerifier
from verifier.config import HopperSettings
from verifier.rim import RIM

text = open(sys.argv[1]).read()
rim = RIM(rim_name="driver", settings=HopperSettings(), content=text)
measurements = rim.get_measurements()
try:
    XMLVerifier().verify(etree.fromstring(text.encode(), etree.XMLParser(resolve_entities=False)),
                         ca_pem_file=sys.argv[2])
    signature = "ok"
except Exception as e:  # noqa: BLE001 - report any refusal
    signature = f"{type(e).__name__}: {e}"
print(json.dumps({"schema": bool(rim.validate_schema()), "version": rim.colloquialVersion, "signature": signature,
                  "active": {str(i): [g.get_value_at_index(k) for k in range(g.get_number_of_alternatives())]
                             for i, g in measurements.items() if g.is_active()}}))
