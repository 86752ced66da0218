"""Limits every way into the memory store shares (capture, MCP, import, import-legacy), in a
module that imports nothing, so the MCP server can state them in its tool list without
loading the store (issue 22: tools/list before anything it does not need)."""

# A memory is a claim, briefs show at most 480 characters of it, and 64 KiB still fits one
# argv word.
MAX_TEXT_BYTES = 64 * 1024
