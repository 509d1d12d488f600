"""Real services the tests start on loopback ports: PostgreSQL, Prometheus, Alertmanager, `trainbot serve`."""
