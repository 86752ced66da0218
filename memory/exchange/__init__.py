"""Publish and import: portable memory files and the checks of untrusted receipts."""
