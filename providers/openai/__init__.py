"""The OpenAI-compatible chat-completions protocol: config, answers, reply and client."""
