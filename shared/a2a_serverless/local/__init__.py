"""The local stack: moto in-process, built from template.yaml, served on one port.

Local-only: never imported by a deployed handler; moto is not a runtime dependency.
"""
