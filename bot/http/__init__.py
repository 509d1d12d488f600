"""The HTTP server under `trainbot serve`, the bot's own metrics, and JSON read within bounds from any sender."""
