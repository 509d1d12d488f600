"""Model promotion with approvals: the policy, the requests and their audit trail, the MLflow registry, and
what MLflow's webhooks announce about it."""
