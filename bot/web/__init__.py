"""`trainbot serve`: the HTTP endpoints (Slack, Alertmanager, MLflow webhooks, health, metrics) and the
background work of a running bot. A webhook's module turns its HTTP request (headers, signature, bounded body and
JSON) into the typed event that actions take."""
