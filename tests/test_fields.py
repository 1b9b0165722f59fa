"""fields.body_outline: the sections a Markdown body is cut into, and its
short way out for bodies with no section hint (profiles without a headings
field take it)."""

import pytest

from retriever.fields import body_outline

BODIES = [
    "",
    "#",
    "\n",
    "Plain text\nwith lines\n\n## Setup\nsteps\n",
    "# Title\n\n## When to use\n- a case\n- another\n\n## How\nsteps\n",
    "# T\n## When NOT to use\n- never this\n## Next\nkept\n",
    "```\n# use when: only a comment in a fence\n```\nbody\n",
    "  # Not for indented\nfoo\n# other\nbar",
    "## Usage scenarios\r\nx\r\n### deeper\r\ny\r\n## Back\r\nz",
    "~~~\n## When to avoid\n~~~\n## Trigger words\nalpha\n#### when not\nbeta\n## end",
]


@pytest.mark.parametrize("body", BODIES)
def test_without_headings_the_sections_are_the_same(body):
    full = body_outline(body)
    short = body_outline(body, headings_too=False)
    assert short[1:] == full[1:]
    assert short[0] in ("", full[0])


def test_a_body_without_hints_comes_back_whole():
    body = "# Title\n\nSome text.\n\n```\n# a comment\n```\n## Steps\n1. one\n"
    assert body_outline(body, headings_too=False) == ("", "", "", body)
    assert body_outline(body)[3] == body
