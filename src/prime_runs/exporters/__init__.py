"""Sinks that the run's workers feed: Prime Traces uploads and v0 sample rows."""
