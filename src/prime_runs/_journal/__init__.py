"""The journal: a run's archive folder, its segments, acknowledgements, leases and the
ledger of records on their way to the sinks.
"""
