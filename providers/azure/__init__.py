"""Azure OpenAI chat completions: OpenAI's protocol at a deployment's URL with an ``api-key``."""
