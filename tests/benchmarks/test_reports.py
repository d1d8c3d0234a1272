"""benchmarks/reports/ holds the current report of each benchmark and the few a decision cites (issue 47): at
most 40 files, each one referenced from a doc (a markdown file outside the folder, docs/decisions.md among
them) or from a referenced report beside it (its plots, its rows); and no doc points at a report file that is
not there (one that left the tree is cited as `git show REV:benchmarks/reports/...`)."""
from __future__ import annotations

import posixpath
import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
REPORTS = REPO / "benchmarks" / "reports"
MAX_FILES = 40
PATH = re.compile(r"benchmarks/reports/([\w.*/-]*)")
FROM_HISTORY = re.compile(r"(?:\b[0-9a-f]{7,40}|\bREV):$")     # `git show REV:benchmarks/reports/...`
LOCAL_NAME = re.compile(r"(?<![\w/.-])((?:\.\./)?[\w.-]+\.(?:md|png|json|jsonl\.gz))(?![\w/-])")


def _git_files(*args: str) -> list[str] | None:
    try:
        out = subprocess.run(["git", "-C", str(REPO), "ls-files", *args], capture_output=True, text=True,
                             check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    return out.splitlines()


def report_files() -> set[str]:
    """The folder's files (relative to it): tracked ones and new ones git does not ignore (a bench's logs)."""
    files = _git_files("--cached", "--others", "--exclude-standard", "benchmarks/reports")
    if files is None:
        return {p.relative_to(REPORTS).as_posix() for p in REPORTS.rglob("*")
                if p.is_file() and p.suffix != ".log"}
    prefix = "benchmarks/reports/"
    return {f[len(prefix):] for f in files if f.startswith(prefix) and (REPO / f).is_file()}


def docs() -> list[Path]:
    """Every markdown file of the repository outside benchmarks/reports (and outside installed packages)."""
    files = _git_files("--cached", "--others", "--exclude-standard", "*.md")
    paths = [REPO / f for f in files] if files is not None else list(REPO.rglob("*.md"))
    return sorted(p for p in paths if p.is_file() and REPORTS not in p.parents
                  and "node_modules" not in p.parts and ".venv" not in p.parts)


def mentions(text: str) -> list[str]:
    """`benchmarks/reports/...` paths a text points at in the tree (not those read from git history)."""
    out = []
    for m in PATH.finditer(text):
        if FROM_HISTORY.search(text[max(0, m.start() - 41):m.start()]):
            continue
        out.append(m.group(1).rstrip(".,;:)"))
    return out


def resolve(mention: str, files: set[str]) -> set[str]:
    """The report files a mention names: a file, a folder (its README.md: the folder's index), or a glob."""
    if not mention:
        return set()
    if "*" in mention:
        return {f for f in files if Path(f).match(mention) or Path(f).match(mention + "/*")
                or any(Path(p).match(mention) for p in Path(f).parents if str(p) != ".")}
    mention = mention.rstrip("/")
    if mention in files:
        return {mention}
    return {f"{mention}/README.md"} & files


def referenced(files: set[str]) -> set[str]:
    """Files reached from the docs, then from the reports so reached (names beside them, or ../NAME)."""
    seen = set()
    for doc in docs():
        for m in mentions(doc.read_text(encoding="utf-8")):
            seen |= resolve(m, files)
    frontier = [f for f in seen if f.endswith(".md")]
    while frontier:
        current = frontier.pop()
        text = (REPORTS / current).read_text(encoding="utf-8")
        folder = posixpath.dirname(current)
        names = {posixpath.normpath(posixpath.join(folder, n)) for n in LOCAL_NAME.findall(text)}
        for m in mentions(text):
            names |= resolve(m, files)
        for f in (names & files) - seen:
            seen.add(f)
            if f.endswith(".md"):
                frontier.append(f)
    return seen


def test_the_reports_folder_holds_at_most_40_files():
    files = report_files()
    assert len(files) <= MAX_FILES, (f"benchmarks/reports/ holds {len(files)} files (at most {MAX_FILES}): keep "
                                     "the current report of each benchmark and the ones a decision cites; cite a "
                                     "removed one as `git show REV:benchmarks/reports/...`")


def test_every_report_file_is_referenced_from_a_doc():
    files = report_files()
    unreferenced = sorted(files - referenced(files))
    assert not unreferenced, ("report files no doc or decision refers to (name them in a doc — CONTRIBUTING.md "
                              "lists the current reports — or remove them):\n" + "\n".join(unreferenced))


def test_no_doc_points_at_a_report_file_that_is_not_there():
    files = report_files()
    dangling = [f"{doc.relative_to(REPO)}: benchmarks/reports/{m}" for doc in docs()
                for m in mentions(doc.read_text(encoding="utf-8")) if m and not resolve(m, files)
                and not any(f.startswith(m.rstrip("/") + "/") for f in files)]
    assert not dangling, ("docs point at report files that are not in the tree (cite a removed one as "
                          "`git show REV:benchmarks/reports/...`):\n" + "\n".join(dangling))


def test_a_folder_mention_counts_for_its_readme_and_history_citations_do_not_count():
    files = {"typing-cost2/README.md", "typing.md", "typing_latency_cdf.png"}
    assert resolve("typing-cost2/", files) == {"typing-cost2/README.md"}
    assert resolve("typing.md", files) == {"typing.md"}
    assert mentions("see `git show 4d25a71:benchmarks/reports/typing-final/rows.jsonl.gz`") == []
    assert mentions("(benchmarks/reports/typing.md).") == ["typing.md"]
