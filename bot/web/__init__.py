"""`trainbot serve`: the HTTP endpoints (Slack, Alertmanager, MLflow webhooks, health, metrics) and the
background work of a running bot."""
