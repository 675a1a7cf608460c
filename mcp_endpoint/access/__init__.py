"""Letting a request in: Host and Origin, API keys and scopes, rate limits, client addresses."""
