"""The README's claims point at real report rows, and those reports are publishable.

Every relative link of README.md (and of docs/ and benchmarks/README.md) must name a file
of the checkout; a ``#fragment`` must name an anchor of that file: an ``<a id="...">`` row
anchor or a heading's GitHub slug. A benchmark report linked from the README's Results
section must carry the publishable stamp its harness writes (``benchmarks/_validity.py``:
``**Publishable**`` in a markdown report, a ``Publishable:`` line in a text report) and no
``NOT FOR PUBLICATION`` stamp, so that a number is never quoted from a run taken under
load or from a modified tree.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", ROOT / "benchmarks" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^()\s]+)\)")


def github_slug(heading: str) -> str:
    """The anchor GitHub gives a markdown heading (lower case, punctuation dropped, '-' for spaces)."""
    text = re.sub(r"<[^>]+>", "", heading).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Row anchors and heading slugs of a markdown file (duplicate headings get -1, -2, ...)."""
    text = path.read_text(encoding="utf-8")
    found = set(re.findall(r'<a id="([^"]+)"', text))
    seen: dict[str, int] = {}
    for m in re.finditer(r"^#{1,6} (.+)$", text, re.M):
        slug = github_slug(m.group(1))
        n = seen.get(slug, 0)
        found.add(slug if n == 0 else f"{slug}-{n}")
        seen[slug] = n + 1
    return found


def links(text: str, base: Path, doc: Path) -> list[tuple[Path, str]]:
    """(target file, fragment) of every relative link of ``text`` outside code blocks;
    ``base`` is the folder relative targets start from, ``doc`` the file a bare ``#x`` names."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)
    out = []
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
            continue
        path, _, frag = target.partition("#")
        out.append(((base / path).resolve() if path else doc, frag))
    return out


def results_section(text: str) -> str:
    start = text.index("\n## Results")
    nxt = text.find("\n## ", start + 1)
    return text[start : nxt if nxt > 0 else len(text)]


def test_slug_follows_github():
    assert github_slug("Roofline: Gram throughput and FWHT bandwidth (`roofline`)") == (
        "roofline-gram-throughput-and-fwht-bandwidth-roofline"
    )
    assert github_slug("cod_rna (binary)") == "cod_rna-binary"


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(doc):
    broken = []
    for path, frag in links(doc.read_text(encoding="utf-8"), doc.parent, doc):
        if not path.exists():
            broken.append(f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}: no such file")
        elif frag and path.suffix == ".md" and frag not in anchors(path):
            broken.append(f"{path.relative_to(ROOT)}#{frag}: no such anchor")
    assert not broken, f"{doc.name}: " + "; ".join(broken)


def test_results_quote_publishable_reports_only():
    section = results_section((ROOT / "README.md").read_text(encoding="utf-8"))
    reports = {
        path
        for path, _ in links(section, ROOT, ROOT / "README.md")
        if path.is_relative_to(ROOT / "benchmarks" / "results") and path.is_file()
    }
    assert reports, "the Results section links no benchmark report"
    bad = []
    for path in sorted(reports):
        text = path.read_text(encoding="utf-8")
        stamped = "**Publishable**" in text if path.suffix == ".md" else re.search(r"^Publishable:", text, re.M)
        if not stamped or "NOT FOR PUBLICATION" in text:
            bad.append(str(path.relative_to(ROOT)))
    assert not bad, f"README Results quote reports without the publishable stamp: {bad}"
