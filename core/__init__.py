"""Plumbing every app shares. Imports no domain app (docs/architecture.md)."""
