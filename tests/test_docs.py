"""The design document is the contract the code cites: every `docs/design.md#<anchor>` in the
repository must name a heading of docs/design.md, and no citation of the old, external
contract document may remain."""

from __future__ import annotations

import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DESIGN = ROOT / "docs" / "design.md"

SKIPPED_DIRS = {".venv", ".git", "work", "node_modules", "build", "dist", "__pycache__"}
SKIPPED_ENDINGS = ("_cache", ".egg-info")
TEXT_SUFFIXES = {".py", ".md", ".sql", ".yaml", ".yml", ".toml", ".html", ".j2", ".txt", ".cfg"}

CITATION = re.compile(r"docs/design\.md#([\w-]+)")
LOCAL_LINK = re.compile(r"\]\(#([^)\s]+)\)")
HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
# A citation of the external contract ("SPEC section 4", "SPEC.md", "see SPEC", ...): the word
# in capitals anywhere but in the `--map SPEC` placeholder of the freeze command.
OLD_CITATION = re.compile(r"(?<!--map )\bSPEC\b")


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to `-`."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def design_anchors(markdown: str) -> set[str]:
    """Anchors of every heading outside code fences; repeated ones get `-1`, `-2`, ..."""
    anchors: set[str] = set()
    seen: dict[str, int] = {}
    fenced = False
    for line in markdown.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        match = None if fenced else HEADING.match(line)
        if match is None:
            continue
        anchor = github_anchor(match.group(2))
        count = seen.get(anchor, 0)
        seen[anchor] = count + 1
        anchors.add(anchor if count == 0 else f"{anchor}-{count}")
    return anchors


def repository_texts() -> list[Path]:
    """Every text file of the project (not the venv, the work directory or git)."""
    files = []
    for folder, dirs, names in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in SKIPPED_DIRS and not d.endswith(SKIPPED_ENDINGS)]
        files += [Path(folder, n) for n in names if Path(n).suffix in TEXT_SUFFIXES]
    return sorted(files)


def test_github_anchor_rules() -> None:
    assert github_anchor("Crash safety and claims") == "crash-safety-and-claims"
    assert github_anchor("Plans and the `presentation` map") == "plans-and-the-presentation-map"
    assert github_anchor("paired_unanimity (balanced)") == "paired_unanimity-balanced"
    assert design_anchors("# A\n## A\n```\n# not a heading\n```\n") == {"a", "a-1"}


def test_every_cited_anchor_is_a_heading() -> None:
    anchors = design_anchors(DESIGN.read_text("utf-8"))
    cited: list[tuple[str, str]] = []
    for path in repository_texts():
        text = path.read_text("utf-8", errors="replace")
        where = str(path.relative_to(ROOT))
        cited += [(where, anchor) for anchor in CITATION.findall(text)]
        if path == DESIGN:
            cited += [(where, anchor) for anchor in LOCAL_LINK.findall(text)]
    unknown = sorted({(where, a) for where, a in cited if a not in anchors})
    assert not unknown, f"cited anchors missing from docs/design.md: {unknown}"
    assert len(cited) > 10  # the code does cite the design document


def test_no_citation_of_the_external_contract_remains() -> None:
    own = Path(__file__).resolve()
    found = []
    for path in repository_texts():
        if path == own:
            continue
        for number, line in enumerate(path.read_text("utf-8", errors="replace").splitlines(), 1):
            if OLD_CITATION.search(line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not found, "cite docs/design.md#<anchor> instead:\n" + "\n".join(found)


def test_readme_points_into_the_design_document() -> None:
    assert "docs/design.md" in (ROOT / "README.md").read_text("utf-8")


YAML_BLOCK = re.compile(r"```yaml\n(.*?)```", re.DOTALL)


def _readme_yaml(marker: str) -> list[str]:
    return [b for b in YAML_BLOCK.findall((ROOT / "README.md").read_text("utf-8")) if marker in b]


def test_the_readmes_dataset_paths_exist_in_a_clone_or_beside_the_config() -> None:
    """The run configuration read its datasets from `../shared/data`, which a clone of the
    repository does not have: every dataset path is beside the configuration."""
    import yaml

    blocks = _readme_yaml("datasets:")
    assert blocks
    for block in blocks:
        for dataset in yaml.safe_load(block)["datasets"]:
            path = dataset.get("path")
            assert path is None or not Path(path).is_absolute() and ".." not in Path(path).parts


def test_the_readmes_personas_file_is_one_serve_judge_reads(tmp_path: Path) -> None:
    """The personas file's format was nowhere: the README's example is read as serve-judge
    reads `--personas`, and names every field a persona has."""
    from flows.cli.simjudge import _load_personas
    from simjudge.persona import Faults, Persona

    (block,) = _readme_yaml("# personas file")
    path = tmp_path / "personas.yaml"
    path.write_text(block, "utf-8")
    (persona,) = _load_personas(path)
    assert persona.name == "careful" and persona.skill == 0.85
    assert persona.faults.rate_429 == 0.05 and persona.reasoning["high"].left_bias == -0.1
    for field in (*Persona.model_fields, *Faults.model_fields):
        assert field in block, field
    assert "simulated: true" in (ROOT / "README.md").read_text("utf-8")
