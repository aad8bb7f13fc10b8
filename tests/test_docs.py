"""The README and docs/ stay short and their links resolve: every relative markdown link (and
image) names an existing file, and every #anchor a heading of that file, as GitHub spells it."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")),
         ROOT / "benchmarks" / "RESULTS.md", ROOT / "benchmarks" / "HISTORY.md"]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def prose(text: str) -> str:
    """The text outside fenced code blocks and inline code spans."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "", text)


def heading_text(path: Path) -> str:
    """Headings keep their inline code: GitHub's ids are made from the text with the backticks gone."""
    return re.sub(r"`", "", path.read_text(encoding="utf-8"))


def links(path: Path) -> list[str]:
    """The link targets outside code, but for absolute addresses (http:, mailto:, ...)."""
    return [t for t in LINK.findall(prose(path.read_text(encoding="utf-8")))
            if not re.match(r"^[a-z]+:", t)]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page):
    assert page.is_file(), page
    broken = []
    for target in links(page):
        file, _, anchor = target.partition("#")
        dest = (page.parent / file).resolve() if file else page
        if not dest.exists():
            broken.append(f"{target}: no file {dest.relative_to(ROOT)}")
        elif anchor and dest.suffix == ".md" and anchor not in heading_anchors(dest):
            broken.append(f"{target}: no heading #{anchor} in {dest.relative_to(ROOT)}")
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)


def heading_anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    ids = set()
    in_code = False
    for line in heading_text(path).splitlines():
        if line.startswith("```"):
            in_code = not in_code
        m = re.match(r"^#{1,6} (.*)$", line)
        if m and not in_code:
            slug = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
            n = seen.get(slug, 0)
            seen[slug] = n + 1
            ids.add(slug if n == 0 else f"{slug}-{n}")
    return ids


def test_the_readme_is_short():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 230, f"README.md: {len(lines)} lines, at most 230 (move the how and why to docs/)"


def test_the_readme_opens_with_the_commands_ci_runs():
    """The README's first code block holds the demo and the test command, and the test command is
    the one .ci/run runs (the whole suite on the machine's Python)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    first = re.search(r"^```bash\n(.*?)^```", readme, flags=re.S | re.M).group(1)
    commands = [line.split("#")[0].strip() for line in first.splitlines()]
    assert commands[0] == "pip install -e . torch==2.13.0 && aiayn demo", commands
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()]
    assert commands[1] in ci, f"README.md's test command {commands[1]!r} is not a line of .ci/run"


def test_the_readme_names_modules_that_exist():
    """The paper-to-code table names files under src/aiayn/ that are there (a move updates it)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    named = set(re.findall(r"`([a-z_/0-9]+\.py)`", readme))
    missing = sorted(p for p in named if not (ROOT / "src" / "aiayn" / p).is_file()
                     and not (ROOT / "benchmarks" / p).is_file())
    assert named and not missing, f"README.md names modules that are not in src/aiayn/ or benchmarks/: {missing}"
