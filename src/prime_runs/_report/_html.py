"""The page: template, stylesheet and scripts (package data files beside this module) plus
the report's data, assembled into one self-contained HTML document.

Record content is untrusted (a model can write ``</script>``), so:

* the data sits in a ``<script type="application/json">`` block with ``<``, ``>``, ``&`` and
  U+2028/U+2029 written as ``\\uXXXX`` escapes, so no text in it can close the block or open
  a tag, and ``JSON.parse`` reads back exactly the original strings;
* the scripts only ever put data into the page with ``textContent`` and ``createElement``;
* a Content-Security-Policy allows nothing but this page's own script and stylesheet (by
  their sha256) and ``data:`` images: no request can leave the page, and an injected
  handler or script would not run even if it reached the DOM.
"""

from __future__ import annotations

import base64
import hashlib
import html
import re
from collections.abc import Sequence
from importlib import resources
from typing import Any

from .._json import encode_json_lenient

# Read in this order and joined into the page's one script.
SCRIPTS = ("dom.js", "charts.js", "tables.js", "browser.js", "report.js")
_PLACEHOLDER = re.compile(r"\{\{([A-Z]+)\}\}")
_ESCAPES = {
    "<": "\\u003c",
    ">": "\\u003e",
    "&": "\\u0026",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}
_UNSAFE = re.compile("[<>&\u2028\u2029]")


def asset(name: str) -> str:
    return resources.files(__package__).joinpath(name).read_text("utf-8")


def script_text() -> str:
    body = "\n".join(asset(name) for name in SCRIPTS)
    return f'(function () {{\n"use strict";\n{body}\n}})();\n'


def embed_json(data: Any) -> str:
    """``data`` as JSON that is inert inside a ``<script type="application/json">`` block."""
    text = encode_json_lenient(data)[0].decode("utf-8")
    return _UNSAFE.sub(lambda m: _ESCAPES[m.group(0)], text)


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
    return "prime-runs report: " + (" vs ".join(names) if names else "no runs")


def render(data: dict[str, Any]) -> str:
    """The whole HTML document for ``data`` (as built by ``_build.build``)."""
    script = script_text()
    style = asset("report.css")
    parts = {
        "CSP": html.escape(content_security_policy(script, style), quote=False).replace(
            '"', "&quot;"
        ),
        "TITLE": html.escape(title([str(r.get("name")) for r in data.get("runs", [])])),
        "STYLE": style,
        "DATA": embed_json(data),
        "SCRIPT": script,
    }
    # One pass over the template only, so nothing inside the data is ever substituted.
    return _PLACEHOLDER.sub(lambda m: parts[m.group(1)], asset("template.html"))
