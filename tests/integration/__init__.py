"""Integration tests (marked): a real Ray head, mlflow server, Prometheus and Alertmanager on loopback ports."""
