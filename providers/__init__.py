"""Calling a model endpoint: transport, shared limiter, a call's stop, prices, and the protocol
adapters (``providers.openai``). Imports only ``core`` and ``stats``."""
