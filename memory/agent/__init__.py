"""The agent loop: hooks, `cited` (the inverse code index's readers) and refresh."""
