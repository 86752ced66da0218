"""citegraph.cli."""
