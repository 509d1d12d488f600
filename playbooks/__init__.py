"""Runbooks, one Markdown page per finding id, shipped as package data."""
