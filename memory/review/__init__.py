"""The PR check, its output formats and the memory-health report."""
