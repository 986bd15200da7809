"""mkdocs hook: the Sphinx roles of the docstrings (``:class:`~privmarg.X```) as cross-references.

mkdocstrings renders ``:class:`X``` as the text ":class:" before ``X`` in code; this turns each
into an optional autoref (a link where the object is documented on the site, plain code where it
is not), showing the last component for ``~``-prefixed targets and the text of ``text <target>``.
"""

from __future__ import annotations

import html
import re

ROLE = re.compile(r":(class|meth|func|mod|attr|data|exc|obj|ref):<code>(.*?)</code>", re.S)
LABELLED = re.compile(r"^(.*?)\s*&lt;([^&]+)&gt;$", re.S)


def _link(match: re.Match) -> str:
    role, body = match.group(1), match.group(2)
    labelled = LABELLED.match(body)
    if labelled:
        shown, target = labelled.group(1), labelled.group(2)
    else:
        target = body.lstrip("~")
        shown = target.rsplit(".", 1)[-1] if body.startswith("~") else target
        if role in ("meth", "func"):
            shown += "()"
    target = html.unescape(target).strip()
    return f'<autoref identifier="{html.escape(target, quote=True)}" optional><code>{shown}</code></autoref>'


def on_page_content(content: str, **kwargs) -> str:
    return ROLE.sub(_link, content)
