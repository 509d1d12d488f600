"""Parsers turn the services' own formats into typed records for the rules.

Text logs go through line patterns (one table per format: NCCL, PyTorch distributed, CUDA,
Ray, Kubernetes text, kernel messages, MLflow); JSON and JSONL files have parsers of their own.
"""
