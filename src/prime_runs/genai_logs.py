"""GenAI content and evaluations sent as OpenTelemetry log records (see ``docs/genai.md``).

``pr.configure_exporter()`` attaches :class:`GenAILogProcessor` to the global SDK logger
provider when one is set. Set up logging after it, or on a provider of your own, with
``attach(logger_provider)``; in zero-code setups, ``OTEL_LOGS_EXPORTER=prime_runs``.
"""

from __future__ import annotations

from ._genai.log_processor import GenAILogProcessor, PrimeRunsLogExporter, attach

__all__ = ["GenAILogProcessor", "PrimeRunsLogExporter", "attach"]
