"""Unit tests, in the rooms of what they test; real embedded services (sqlite, PostgreSQL, MLflow) where one exists."""
