"""The README a newcomer reads: short, its two commands as documented, its example runnable as
written, and every link from it and from docs/index.md leading somewhere.

Each ```python block of README.md runs on its own in a fresh interpreter (a reader copies one
block), in an empty working directory, with matplotlib's non-interactive backend.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
INDEX = DOCS / "index.md"

MAX_README_LINES = 150
#: The quick start, byte for byte: install and run the demo; install and run the checks.
QUICK_START = [
    "python3 -m venv .venv && .venv/bin/pip install -q . && .venv/bin/privpca demo",
    "bash .ci/run",
]

_FENCE = re.compile(r"^(```|~~~)\s*([\w+-]*)\s*$")
_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_REF_LINK = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)", re.MULTILINE)
_HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")


def _blocks(text: str) -> list[tuple[str, str]]:
    """(language, body) of every fenced code block."""
    blocks: list[tuple[str, str]] = []
    lang: str | None = None
    fence = ""
    body: list[str] = []
    for line in text.splitlines():
        match = _FENCE.match(line.strip()) if lang is None else None
        if lang is None and match:
            fence, lang, body = match.group(1), match.group(2).lower(), []
        elif lang is not None and line.strip() == fence:
            blocks.append((lang, "\n".join(body) + "\n"))
            lang = None
        elif lang is not None:
            body.append(line)
    assert lang is None, "an unclosed code block"
    return blocks


def _prose(text: str) -> str:
    """The text outside fenced code blocks and inline code spans."""
    kept: list[str] = []
    fence = ""
    for line in text.splitlines():
        match = _FENCE.match(line.strip())
        if not fence and match:
            fence = match.group(1)
        elif fence and line.strip() == fence:
            fence = ""
        elif not fence:
            kept.append(re.sub(r"`[^`]*`", "", line))
    return "\n".join(kept)


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: the text of its links, lower case, punctuation dropped
    (word characters, hyphens and spaces kept), spaces as hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    anchors: set[str] = set()
    seen: dict[str, int] = {}
    fence = ""
    for line in path.read_text(encoding="utf-8").splitlines():
        match = _FENCE.match(line.strip())
        if not fence and match:
            fence = match.group(1)
            continue
        if fence:
            if line.strip() == fence:
                fence = ""
            continue
        heading = _HEADING.match(line)
        if heading:
            slug = _slug(heading.group(2))
            count = seen.get(slug, 0)
            seen[slug] = count + 1
            anchors.add(slug if count == 0 else f"{slug}-{count}")
    return anchors


def _relative_links(path: Path) -> list[str]:
    prose = _prose(path.read_text(encoding="utf-8"))
    links = _LINK.findall(prose) + _REF_LINK.findall(prose)
    return [link for link in links if not re.match(r"^[a-zA-Z][\w+.-]*:", link)]


def _python_blocks() -> list[str]:
    return [body for lang, body in _blocks(README.read_text(encoding="utf-8"))
            if lang in ("python", "py")]


def test_readme_is_short():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_README_LINES, f"README.md has {len(lines)} lines"


def test_quick_start_is_the_two_commands():
    text = README.read_text(encoding="utf-8")
    section = text.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    commands = [body for lang, body in _blocks(section) if lang in ("bash", "sh", "shell")]
    assert len(commands) == 1, "the quick start is one shell block"
    assert [line for line in commands[0].splitlines() if line.strip()] == QUICK_START


def test_readme_has_a_python_example():
    assert _python_blocks(), "README.md has no ```python block"


@pytest.mark.parametrize("index", range(len(_python_blocks())))
def test_readme_python_block_runs(index, tmp_path):
    code = _python_blocks()[index]
    env = {**os.environ, "MPLBACKEND": "Agg"}
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, (
        f"README.md's python block {index} failed:\n{code}\n--- stdout\n{done.stdout}"
        f"\n--- stderr\n{done.stderr}"
    )


@pytest.mark.parametrize("page", [README, INDEX], ids=["README.md", "docs/index.md"])
def test_relative_links_lead_somewhere(page):
    broken = []
    for link in _relative_links(page):
        target, _, anchor = link.partition("#")
        path = (page.parent / target).resolve() if target else page
        if not path.exists():
            broken.append(f"{link}: no file {path.relative_to(ROOT)}")
        elif anchor and path.suffix == ".md" and anchor not in _anchors(path):
            broken.append(f"{link}: no heading #{anchor} in {path.relative_to(ROOT)}")
    assert not broken, f"broken links in {page.relative_to(ROOT)}:\n" + "\n".join(broken)


def test_index_links_every_docs_page():
    linked = {
        (INDEX.parent / link.partition("#")[0]).resolve()
        for link in _relative_links(INDEX) if link.partition("#")[0]
    }
    pages = {page.resolve() for page in DOCS.rglob("*.md") if page != INDEX}
    missing = sorted(str(page.relative_to(ROOT)) for page in pages - linked)
    assert not missing, "docs pages missing from docs/index.md: " + ", ".join(missing)
