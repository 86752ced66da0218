"""citegraph.server."""
