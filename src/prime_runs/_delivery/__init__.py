"""Delivery: the process's sink workers, each run's delivery, and the index the workers
and exporters find runs by.
"""
