"""The diagnosers: bundles read, logs scanned, rules and their runbooks, the corpus of real logs."""
