"""Parsers turn the services' own formats into typed records for the rules.

Text logs go through line patterns, one table per format, in three rooms: frameworks/ (PyTorch distributed,
Horovod, JAX, MPI launchers, Ray, MLflow), platform/ (CUDA, NCCL, kernel messages, Kubernetes text) and
timings/ (step and throughput lines). The core they share stays here: signals (a pattern and what it found),
prefixes (what launchers put before a line), tracebacks, the generic failure lines, the one-pass log parser
(logs) and the parsers of a bundle's JSON files (json_sources).
"""
