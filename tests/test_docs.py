"""The README is a front page: short, and every document under docs/ is reachable
from it; every relative link in the README and docs/ points at a file that exists."""

import pathlib
import re

REPO = pathlib.Path(__file__).resolve().parent.parent
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def _relative_links(path: pathlib.Path) -> list[str]:
    return [t for t in LINK.findall(path.read_text()) if "://" not in t and not t.startswith("mailto:")]


def test_readme_is_a_front_page():
    lines = (REPO / "README.md").read_text().splitlines()
    assert len(lines) < 200, f"README has {len(lines)} lines: move reference material to docs/"
    longest = max((len(p.splitlines()) for p in "\n".join(lines).split("\n\n")), default=0)
    assert longest <= 12, f"a README paragraph of {longest} lines"


def test_every_doc_is_linked_from_the_readme():
    linked = {(REPO / t).resolve() for t in _relative_links(REPO / "README.md")}
    docs = sorted((REPO / "docs").glob("*.md"))
    assert docs
    missing = [d.name for d in docs if d.resolve() not in linked]
    assert not missing, f"docs not reachable from README.md: {missing}"


def test_relative_links_resolve():
    broken = []
    for doc in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        for target in _relative_links(doc):
            if not (doc.parent / target).exists():
                broken.append(f"{doc.relative_to(REPO)} -> {target}")
    assert not broken, broken
