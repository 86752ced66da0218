"""Worksets: named sets of repositories, prepared and pinned before briefs."""
