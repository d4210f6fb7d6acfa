"""The documentation holds together: every relative link in the README and the pages under docs/
(and the other Markdown files of the repository, the READMEs of benchmark runs included) points to
a file that exists, and to a heading that exists when it names one; the README keeps its two
commands and its quick start, and stays short. BENCHMARKS.md is headline tables, each with the
command that reproduces it; benchmarks/README.md indexes every script and run; the user pages on
limits and GPU testing carry no dated runs; no test runs a script from benchmarks/. No Vulkan
device needed."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted(
    {
        *ROOT.glob("*.md"),
        *(ROOT / "docs").rglob("*.md"),
        *(ROOT / "benchmarks").rglob("*.md"),
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


BENCHMARKS = ROOT / "BENCHMARKS.md"


def _sections(page: Path) -> dict[str, str]:
    """The text under each level-2 heading of a Markdown page, by heading."""
    parts = re.split(r"^## (.+)$", page.read_text(), flags=re.M)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def test_benchmarks_md_is_the_headline_tables_each_with_its_command():
    text = BENCHMARKS.read_text()
    sections = _sections(BENCHMARKS)
    wanted = ("The step against torch", "Storage formats", "Host arrays (NumPy params)", "The training step")
    wanted += ("Lifecycle", "ZeRO-1")
    for start in wanted:
        (body,) = [b for h, b in sections.items() if h.startswith(start)]
        if start.startswith("Host arrays"):
            assert "vk-adam bench --cases host" in body
            continue
        assert "|---" in body, f"{start}: no table"
        commands = re.findall(r"```bash\n(.*?)```", body, flags=re.S)
        assert any("vk-adam bench" in c or "benchmarks/lifecycle/run.sh" in c for c in commands), start
    # A release's figures, not a dated log: no heading names a day.
    dated = [h for h in re.findall(r"^#+ .*$", text, flags=re.M) if re.search(r"20\d\d-\d\d-\d\d", h)]
    assert not dated, dated


def test_every_run_folder_a_page_names_exists():
    """Paths into benchmarks/results/ in the user pages and in BENCHMARKS.md, written as code
    rather than links, still point to a folder or file that exists."""
    pages = [BENCHMARKS, *sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]
    missing = []
    for page in pages:
        for path in re.findall(r"`(benchmarks/results/[^`*\s]+)`", page.read_text()):
            if not (ROOT / path).exists():
                missing.append(f"{page.name}: {path}")
    assert not missing, missing


def test_the_benchmarks_index_names_every_script_and_run():
    index = (ROOT / "benchmarks" / "README.md").read_text()
    table = "\n".join(line for line in index.splitlines() if line.startswith("|"))
    bench = ROOT / "benchmarks"
    scripts = [p for p in bench.iterdir() if p.suffix == ".py" and p.name != "run.py"]
    scripts += [p for p in bench.iterdir() if p.is_dir() and p.name != "results"]
    missing = [p.name for p in scripts if p.relative_to(bench).as_posix() not in table]
    runs = sorted((bench / "results").iterdir())
    missing += [p.name for p in runs if p.is_dir() and f"{p.name}/" not in index]
    assert not missing, f"not in benchmarks/README.md: {missing}"
    assert "run.py" in table


def test_run_folders_hold_data_not_code():
    """Code and data apart: the scripts live in benchmarks/ and write into a run folder."""
    results = ROOT / "benchmarks" / "results"
    code = [p for p in results.rglob("*") if p.suffix in (".py", ".sh", ".c", ".comp", ".glsl")]
    assert not code, [str(p.relative_to(results)) for p in code]


def test_user_pages_on_limits_and_gpu_testing_carry_no_dated_runs():
    for name in ("limits.md", "gpu-testing.md"):
        text = (ROOT / "docs" / name).read_text()
        assert not re.findall(r"20\d\d-\d\d-\d\d", text), name
        assert "results/" not in text, name


def test_no_test_runs_a_script_from_benchmarks():
    """Probe scripts are not the product: a test checks the library, with its helpers in tests/."""
    path = re.compile("benchmarks" + r"/[\w/.-]+\.(?:py|sh|c)\b|[\"']" + "benchmarks" + r"[\"']")
    found = []
    for test in sorted((ROOT / "tests").rglob("*.py")):
        if test.name == Path(__file__).name:
            continue
        found += [f"{test.name}: {m}" for m in path.findall(test.read_text())]
    assert not found, found
