"""GenAI content and evaluations sent as OpenTelemetry log records (see ``docs/genai.md``).

``pr.configure_exporter()`` and ``pr.init()`` attach :class:`GenAILogProcessor` to the
global SDK logger provider when one is set. For logging set up after them, or a provider
of your own, call ``attach(logger_provider)``; in zero-code setups, set
``OTEL_LOGS_EXPORTER=prime_runs``.
"""

from __future__ import annotations

from prime_runs._genai.log_processor import GenAILogProcessor, PrimeRunsLogExporter, attach

__all__ = ["GenAILogProcessor", "PrimeRunsLogExporter", "attach"]
