"""citegraph.graph."""
