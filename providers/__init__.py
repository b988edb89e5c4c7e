"""Calling a model endpoint: the HTTP transport, the shared limiter, a call's stop, retries
and error kinds, the price table, and the protocol adapters (``providers.openai``).

Evals' targets and the judges both call models through this package; it imports no domain
app (only ``core``), so neither reaches into the other's plumbing.
"""
