"""Run in NVIDIA's venv (sim_build/nvenv) by test_nvidia_evidence.py: NVIDIA's own
``Verifier`` on its sample report and the two RIMs its --test_no_gpu mode names; prints
one JSON line (verdict, mismatched indices parsed from its log, the report's nonce).
Never imported by the main venv (it imports NVIDIA's package); run as ``python -c``
with its text, so that this directory (whose verifier.py would shadow NVIDIA's) is not on
sys.path."""
import json
import logging
import re

from verifier.attestation import AttestationReport
from verifier.config import HopperSettings
from verifier.rim import RIM
from verifier.utils import convert_string_to_blob
from verifier.verifier import Verifier

S = HopperSettings()
lines = []
class H(logging.Handler):
    def emit(self, record):
        lines.append(record.getMessage())
logging.getLogger("gpu-verifier-info").addHandler(H())
report = AttestationReport(convert_string_to_blob(open(S.ATTESTATION_REPORT_PATH).read()), S)
drv = RIM(rim_name="driver", settings=S, rim_path=S.TEST_NO_GPU_DRIVER_RIM_PATH)
vb = RIM(rim_name="vbios", settings=S, rim_path=S.TEST_NO_GPU_VBIOS_RIM_PATH)
v = Verifier(report, drv, vb, settings=S)
ok = v.verify(S)
mism = [int(m.group(1)) for line in lines for m in [re.match(r"^\s*(\d+) \[(Driver|Firmware)\]\s*$", line)] if m]
print(json.dumps({"ok": ok, "mismatched": mism, "nonce": report.get_request_message().get_nonce().hex(),
                  "driver_rim_version": drv.colloquialVersion, "vbios_rim_version": vb.colloquialVersion}))
