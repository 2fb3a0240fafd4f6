"""Runs: one run's state and lifecycle (open, register, join, finish, exit hooks)."""
