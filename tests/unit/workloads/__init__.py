"""The training workloads that run inside Ray jobs."""
