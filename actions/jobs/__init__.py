"""Jobs: what a person may launch (templates, search spaces), the launch plan, the service the CLI and Slack
call, the watcher that records each state change, and the backends that run them."""
