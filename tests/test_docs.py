"""The documentation holds together: every relative link in the README and the pages under docs/
(and the other Markdown files of the repository) points to a file that exists, and to a heading
that exists when it names one; the README keeps its two commands and its quick start, and stays
short. No Vulkan device needed."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted(
    {
        *ROOT.glob("*.md"),
        *(ROOT / "docs").rglob("*.md"),
        *(ROOT / "benchmarks").glob("*.md"),
        *(ROOT / "plugins").glob("*/README.md"),
    }
)
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^\s*(```|~~~)")


def _prose(text: str) -> list[str]:
    """The lines outside fenced code blocks, with inline code spans removed."""
    lines, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            lines.append(re.sub(r"`[^`]*`", "", line))
    return lines


def _anchors(page: Path) -> set[str]:
    """GitHub's anchors for the headings of a Markdown page."""
    anchors: set[str] = set()
    seen: dict[str, int] = {}
    fenced = False
    for line in page.read_text().splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        match = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if fenced or not match:
            continue
        slug = re.sub(r"[^\w\- ]", "", match[1].replace("`", "").lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        anchors.add(slug if count == 0 else f"{slug}-{count}")
    return anchors


def _broken_links(page: Path, root: Path = ROOT) -> list[str]:
    broken = []
    name = page.relative_to(root)
    for line in _prose(page.read_text()):
        for target in LINK.findall(line):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:, ...
                continue
            path, _, anchor = target.partition("#")
            file = (page.parent / path).resolve() if path else page
            if not file.exists():
                broken.append(f"{name}: {target} (no such file)")
            elif anchor and file.suffix == ".md" and anchor not in _anchors(file):
                broken.append(f"{name}: {target} (no such heading)")
    return broken


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_point_to_files_and_headings_that_exist(page):
    assert not _broken_links(page)


def test_every_docs_page_is_listed_in_the_readme():
    readme = (ROOT / "README.md").read_text()
    listed = {(ROOT / target.partition("#")[0]).resolve() for target in LINK.findall(readme)}
    missing = [p.name for p in sorted((ROOT / "docs").glob("*.md")) if p.resolve() not in listed]
    assert not missing, f"docs pages the README's Documentation list does not link: {missing}"


def test_the_readme_keeps_the_two_commands_and_the_quick_start_and_stays_short():
    readme = (ROOT / "README.md").read_text()
    assert "bash scripts/vk-adam.sh demo" in readme
    assert "bash scripts/test.sh" in readme
    for heading in ("## Two commands", "## Install", "## Quick start", "## Documentation"):
        assert heading in readme, heading
    assert "opt = vk_adam.AdamW([p], lr=1e-3)" in readme
    # An entry point, not the manual: details belong on a docs/ page linked from the list.
    assert len(readme.encode()) < 10_000, "README.md has grown past 10 KB: move the details into docs/"


def test_the_link_check_catches_a_missing_file_and_a_missing_heading(tmp_path):
    (tmp_path / "other.md").write_text("# Title\n\n## A `code` heading: yes\n")
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](other.md#a-code-heading-yes) [ok](#here) `[not a link](nowhere.md)`\n"
        "```\n[in code](nowhere.md)\n```\n# Here\n"
        "[gone](missing.md) [no heading](other.md#nope) [web](https://example.com/x.md)\n"
    )
    assert _broken_links(page, tmp_path) == [
        "page.md: missing.md (no such file)",
        "page.md: other.md#nope (no such heading)",
    ]
