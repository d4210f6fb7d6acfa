"""Every ```python block of README.md and docs/*.md runs as pasted, on lavapipe (issue 32).

Each block runs in a fresh interpreter (``sys.executable``) in a temporary folder, with
``VK_ADAM_DEVICE`` unset. A block that cannot stand alone carries a marker, an HTML comment on
the line just before its fence:

* ``<!-- snippet: continues -->``: runs after the page's previous Python block(s), as one script
  (the names and files they made are there).
* ``<!-- snippet: torchrun N -->``: runs under ``python -m torch.distributed.run --nproc_per_node N
  --standalone``.
* ``<!-- snippet: file PATH -->``: any block (GLSL, TOML, Python) is written to ``PATH`` in the
  folder of every later block of the page, instead of being run itself.
* ``<!-- snippet: excerpt PATH -->``: lines quoted from ``PATH`` (relative to the repository),
  which is run elsewhere; every line of the block must be a line of that file, in order (a line
  ``...`` stands for lines left out).
* ``<!-- snippet: skip reason="..." -->``: not runnable Python by nature (an abridged excerpt, a
  signature); the reason is required and shown in the skip.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^(\s*)(`{3,})\s*([\w+-]*)\s*$")
MARKER = re.compile(r"^\s*<!--\s*snippet:\s*(.*?)\s*-->\s*$")
KINDS = ("continues", "torchrun", "file", "excerpt", "skip")
TIMEOUT_S = 600


@dataclass
class Block:
    page: Path
    line: int  # of the opening fence, 1-based
    lang: str
    code: str
    marker: str | None = None  # the marker's text after "snippet:", or None
    kind: str | None = None
    arg: str = ""
    before: list[Block] = field(default_factory=list)  # the page's earlier blocks

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def parse_marker(text: str) -> tuple[str, str]:
    """``continues`` -> ("continues", ""); ``skip reason="x"`` -> ("skip", "x"); ..."""
    kind, _, rest = text.partition(" ")
    rest = rest.strip()
    if kind == "skip":
        m = re.fullmatch(r'reason="([^"]*)"', rest)
        return kind, (m.group(1).strip() if m else "")
    return kind, rest


def read_blocks(page: Path) -> list[Block]:
    """Every fenced block of ``page``, with the marker on the line before it (if any)."""
    lines = page.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, ticks, lang = m.groups()
        body: list[str] = []
        j = i + 1
        while j < len(lines) and not re.match(rf"^\s*{ticks}\s*$", lines[j]):
            line = lines[j]
            body.append(line[len(indent) :] if line.startswith(indent) else line.lstrip())
            j += 1
        marker = None
        if i > 0 and (mm := MARKER.match(lines[i - 1])):
            marker = mm.group(1)
        block = Block(page, i + 1, lang.lower(), "\n".join(body) + "\n", marker)
        if marker is not None:
            block.kind, block.arg = parse_marker(marker)
        block.before = list(blocks)
        blocks.append(block)
        i = j + 1
    return blocks


ALL_BLOCKS = [b for page in PAGES for b in read_blocks(page)]
SNIPPETS = [b for b in ALL_BLOCKS if b.lang == "python" and b.kind != "file"]


def test_pages_have_python_snippets() -> None:
    # The extraction itself: a change of fence style must not silently leave nothing to run.
    assert len(SNIPPETS) >= 10, [b.where for b in SNIPPETS]
    assert any(b.page.name == "README.md" for b in SNIPPETS)


def test_markers_are_well_formed() -> None:
    """Every marker sits on the line before a fence, is a known kind, and every skip says why."""
    fence_lines = {(b.page, b.line) for b in ALL_BLOCKS}
    problems = []
    for page in PAGES:
        for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            if "snippet:" not in line or "<!--" not in line:
                continue
            where = f"{page.relative_to(ROOT)}:{n}"
            m = MARKER.match(line)
            if not m:
                problems.append(f"{where}: a marker must be alone on its line: {line!r}")
                continue
            kind, arg = parse_marker(m.group(1))
            if kind not in KINDS:
                problems.append(f"{where}: unknown marker {kind!r} (known: {', '.join(KINDS)})")
            if (page, n + 1) not in fence_lines:
                problems.append(f"{where}: the marker is not on the line just before a fence")
            if kind == "skip" and not arg:
                problems.append(f'{where}: a skip needs a reason: <!-- snippet: skip reason="..." -->')
            if kind == "torchrun" and not arg.isdigit():
                problems.append(f"{where}: torchrun needs a rank count: <!-- snippet: torchrun 2 -->")
            if kind == "file" and (not arg or Path(arg).is_absolute() or ".." in Path(arg).parts):
                problems.append(f"{where}: file needs a relative path inside the snippet's folder")
            if kind == "excerpt" and not (ROOT / arg).is_file():
                problems.append(f"{where}: excerpt names {arg!r}, which is not a file of the repository")
    assert not problems, "\n".join(problems)
    skips = [b for b in SNIPPETS if b.kind == "skip"]
    # Skips are for excerpts only; most blocks must run.
    assert len(skips) * 3 < len(SNIPPETS), [b.where for b in skips]


def script_of(block: Block) -> str:
    """The block's code, after the earlier blocks it continues."""
    parts = [block]
    earlier = [b for b in block.before if b.lang == "python" and b.kind != "file"]
    while parts[0].kind == "continues":
        assert earlier, f"{block.where}: 'continues' with no earlier Python block on the page"
        parts.insert(0, earlier.pop())
    return "\n".join(p.code for p in parts)


def check_excerpt(block: Block) -> None:
    """Every line of the block is a line of the quoted file, in order (``...`` skips lines)."""
    source = [line.strip() for line in (ROOT / block.arg).read_text(encoding="utf-8").splitlines()]
    at = 0
    for n, line in enumerate(block.code.splitlines(), block.line + 1):
        want = line.strip()
        if not want or want == "...":
            continue
        try:
            at = source.index(want, at) + 1
        except ValueError:
            pytest.fail(
                f"{block.where}: line {n} is not in {block.arg} (after line {at}): {want!r}",
                pytrace=False,
            )


# The whole file takes about 30 s on 2 cores; only the multi-process (torchrun) blocks are slow.
CASES = [
    pytest.param(b, id=b.where, marks=[pytest.mark.slow] if b.kind == "torchrun" else []) for b in SNIPPETS
]


@pytest.mark.parametrize("block", CASES)
def test_snippet_runs(block: Block, tmp_path: Path) -> None:
    if block.kind == "skip":
        pytest.skip(f"{block.where}: {block.arg}")
    if block.kind == "excerpt":
        check_excerpt(block)
        return
    for earlier in block.before:
        if earlier.kind == "file":
            target = tmp_path / earlier.arg
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(earlier.code, encoding="utf-8")
    script = tmp_path / "snippet.py"
    script.write_text(script_of(block), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "VK_ADAM_DEVICE"}
    env["PYTHONPATH"] = str(tmp_path)  # a package written by a `file` block imports from here
    if block.kind == "torchrun":
        launcher = ["-m", "torch.distributed.run", "--nproc_per_node", block.arg, "--standalone"]
        cmd = [sys.executable, *launcher, str(script)]
    else:
        cmd = [sys.executable, str(script)]
    try:
        done = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"{block.where}: did not finish in {TIMEOUT_S} s ({shlex.join(cmd)})\n{e.stderr}")
    if done.returncode != 0:
        pytest.fail(
            f"{block.where}: the snippet exited with {done.returncode} ({shlex.join(cmd)} in {tmp_path})\n"
            f"--- code ---\n{script_of(block)}--- stderr ---\n{done.stderr[-6000:]}",
            pytrace=False,
        )
