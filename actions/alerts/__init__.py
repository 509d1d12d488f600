"""Alertmanager's alerts: its webhook notifications read, recorded in one thread per job, and silenced."""
