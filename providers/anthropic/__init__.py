"""Anthropic's Messages API (``POST <base_url>/messages``): client, answers, settings."""
