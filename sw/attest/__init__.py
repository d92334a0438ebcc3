"""Attestation of the modelled H100: RIMs (signed SWID reference manifests), an OCSP
responder model and client, and a local verifier with NVIDIA's default policy
(docs/attestation.md)."""
