"""Delivery: the process's OpenTelemetry pipeline, each run's delivery, and the index
exporters find runs by.
"""
