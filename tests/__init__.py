"""trainbot's tests: unit/ (fast, by room), integration/ (real Ray, MLflow, Prometheus, Alertmanager), corpus/
(real logs with what must be reported), and what they run on: servers/, standins/, builders/."""
