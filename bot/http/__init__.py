"""The HTTP server under `trainbot serve` and the bot's own metrics."""
