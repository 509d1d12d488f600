"""The state store's schema revisions, one module each, applied in order by actions/state/migrations/runner.py."""
