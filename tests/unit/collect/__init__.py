"""Collecting evidence: Kubernetes, local logs, Prometheus queries."""
