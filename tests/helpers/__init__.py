"""Helpers shared by every test directory: fake jobs, record builders, paths."""
