"""The page: template, stylesheet and scripts (package data files beside this module) plus
the report's data, assembled into one self-contained HTML document.

Record content is untrusted (a model can write ``</script>``), so:

* the data sits in a ``<script type="application/json">`` block with ``<``, ``>``, ``&``,
  U+2028/U+2029 and lone surrogates written as ``\\uXXXX`` escapes, so no text in it can
  close the block or open a tag, and ``JSON.parse`` reads back exactly the original strings;
* the scripts only ever put data into the page with ``textContent`` and ``createElement``;
* a Content-Security-Policy allows nothing but this page's own script and stylesheet (by
  their sha256) and ``data:`` images: no request can leave the page, and an injected
  handler or script would not run even if it reached the DOM.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import re
from collections.abc import Sequence
from importlib import resources
from typing import Any

from prime_runs._records.jsonio import sanitize_nonfinite

# Read in this order and joined into the page's one script.
SCRIPTS = (
    "dom.js",
    "charts.js",
    "linechart.js",
    "tables.js",
    "browser.js",
    "training.js",
    "report.js",
)
_PLACEHOLDER = re.compile(r"\{\{([A-Z]+)\}\}")
# Characters that could end the data block or open markup, the two JavaScript line
# terminators, and lone surrogates (valid in a JSON string escape, not in UTF-8).
_UNSAFE = re.compile("[<>&\u2028\u2029\ud800-\udfff]")


def _escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group(0)):04x}"


def asset(name: str) -> str:
    return resources.files(__package__).joinpath(name).read_text("utf-8")


def script_text() -> str:
    body = "\n".join(asset(name) for name in SCRIPTS)
    return f'(function () {{\n"use strict";\n{body}\n}})();\n'


def embed_json(data: Any) -> str:
    """``data`` as JSON that is inert inside a ``<script type="application/json">`` block.
    Non-finite numbers become ``null``."""
    try:
        text = json.dumps(data, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except ValueError:
        clean = sanitize_nonfinite(data)
        text = json.dumps(clean, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return _UNSAFE.sub(_escape, text)


def _sha256(text: str) -> str:
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return "'sha256-" + base64.b64encode(digest).decode("ascii") + "'"


def content_security_policy(script: str, style: str) -> str:
    return (
        f"default-src 'none'; script-src {_sha256(script)}; style-src {_sha256(style)}; "
        "img-src data:; font-src 'none'; connect-src 'none'; base-uri 'none'; "
        "form-action 'none'"
    )


def title(names: Sequence[str]) -> str:
    text = "prime-runs report: " + (" vs ".join(names) if names else "no runs")
    return text.encode("utf-8", "replace").decode("utf-8")  # a lone surrogate becomes "?"


def _label(run: dict[str, Any]) -> str:
    tag = run.get("tag")
    return f"{run.get('name')} ({tag})" if tag else str(run.get("name"))


def render(data: dict[str, Any]) -> str:
    """The whole HTML document for ``data`` (as built by ``_build.build``)."""
    script = script_text()
    style = asset("report.css")
    parts = {
        "CSP": html.escape(content_security_policy(script, style), quote=False).replace(
            '"', "&quot;"
        ),
        "TITLE": html.escape(title([_label(r) for r in data.get("runs", [])])),
        "STYLE": style,
        "DATA": embed_json(data),
        "SCRIPT": script,
    }
    # One pass over the template only, so nothing inside the data is ever substituted.
    return _PLACEHOLDER.sub(lambda m: parts[m.group(1)], asset("template.html"))
