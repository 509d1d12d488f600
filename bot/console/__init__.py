"""`trainbot console`: Slack in a terminal, with the local Web API the bot talks to there."""
