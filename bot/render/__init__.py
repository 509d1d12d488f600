"""How things look: Block Kit from the jinja2 templates within Slack's limits, charts, and terminal text."""
