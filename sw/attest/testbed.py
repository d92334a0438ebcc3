"""One attestation set-up shared by the tests and the bench: a device, a RIM authority, the
modelled firmware's RIMs, an OCSP responder for both chains, and a helper that runs a real
SPDM session (sw.spdm requester ↔ responder) over RTS values from a measured boot."""
import datetime

from sw.attest.firmware import ModelledFirmware
from sw.attest.identity import RimAuthority
from sw.attest.ocsp import OcspClient, OcspResponder
from sw.attest.rim import write_rim
from sw.attest.verifier import Policy
from sw.rts.model import MeasurementStore
from sw.spdm.identity import Manufacturer
from sw.spdm.messages import V11
from sw.spdm.requester import Requester
from sw.spdm.responder import Responder

__all__ = ["AT", "Env"]

AT = datetime.datetime(2030, 1, 1, tzinfo=datetime.timezone.utc)


class Env:
    """Everything one verification of our own evidence needs."""

    def __init__(self):
        self.manufacturer = Manufacturer(b"attest-manufacturer")
        self.device = self.manufacturer.issue_device(0x4100_A77E)
        self.rim_authority = RimAuthority()
        self.signer = self.rim_authority.signer()
        self.firmware = ModelledFirmware()
        self.driver_rim = write_rim(product="GH100", version=self.firmware.driver_version,
                                    golden=self.firmware.golden("driver"), signer=self.signer)
        self.vbios_rim = write_rim(product="GH100", version=self.firmware.vbios_version,
                                   golden=self.firmware.golden("vbios"), signer=self.signer)
        self.ocsp = OcspResponder(clock=lambda: AT)
        m = self.manufacturer
        certs = list(self.device.certificates)[::-1]  # leaf first
        self.ocsp.add_chain(certs, [self.device.device_key, m.provisioner_key, m.product_key, m.root_key])
        rim_certs = list(self.signer.certificates)
        self.ocsp.add_chain(rim_certs, [self.rim_authority.ca_key, self.rim_authority.root_key])

    def policy(self, **kw):
        kw.setdefault("ocsp", OcspClient(self.ocsp))
        kw.setdefault("at", AT)
        return Policy(self.manufacturer.root, self.rim_authority.root, **kw)

    def rts(self, cc_mode="on", firmware=None):
        store = (firmware or self.firmware).boot(MeasurementStore(), cc_mode)
        return [store.read(i).value for i in range(64)], [store.read(i).count for i in range(64)]

    def session(self, *, cc_mode="on", version=V11, values=None, firmware=None):
        """Run KEY_EXCHANGE/FINISH then GET_MEASUREMENTS (H100's order); return
        (report, SPDM cert chain, nonce sent, vca, SessionResult)."""
        rts_values, counts = self.rts(cc_mode, firmware)
        values = values if values is not None else rts_values
        responder = Responder(self.device, lambda: values, extend_counts=lambda: counts)
        requester = Requester(responder.handle, self.manufacturer.root, versions=(version,))
        result = requester.run(h100_order=True)
        nonce = result.report_request[4:36]
        return result.report_request + result.report_response, requester.chain, nonce, requester.vca, result

