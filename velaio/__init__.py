"""Leaf helpers every layer may import: atomic file writes, SQLite opening, BEIR/JSONL readers, passage text.

Imports no other project package (an import-linter contract checks it)."""
