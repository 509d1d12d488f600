"""The Slack app: commands, buttons, posters, limits, Socket Mode, authorization."""
