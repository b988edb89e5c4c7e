"""The OpenAI-compatible chat-completions protocol: the endpoint's config (``endpoint``),
reading its answers (``answers``), the reply (``reply``) and the client that sends a body
with retries, limiter slots and cancel checks (``client``)."""
