"""Batch validation of checkpoints across many repositories (docs/checkpoints.md)."""
