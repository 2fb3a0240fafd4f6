"""GenAI semantic-convention spans under a run, mapped to episode records (docs/genai.md)."""

from __future__ import annotations

from prime_runs._genai.collector import GenAICollector

__all__ = ["GenAICollector"]
