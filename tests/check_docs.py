#!/usr/bin/env python3
"""The documents stay true: the README is short and what it shows is real, every link leads
to a file, and the docs index lists every document.

- README.md has at most 150 lines; the commands of its sh blocks are executable files of the
  repository; every command its command-line block names answers `ptwm COMMAND --help`
  (with PTWM_BIN, the CLI of the build under test).
- The README's table and bench/RESULTS.md's suite tables are the rows bench/suite_report.py
  makes from the committed figures, docs/bench-results.csv.
- Every relative link of README.md, docs/, bench/, python/README.md leads to a file.
- docs/README.md links to every document of the repository.

Usage: tests/check_docs.py (ctest's check_docs; PTWM_SOURCE_DIR: the repository)
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.environ.get("PTWM_SOURCE_DIR") or os.path.dirname(
    os.path.dirname(os.path.abspath(__file__)))
LINK = re.compile(r"\]\(([^)\s#]+)(?:#[^)]*)?\)")
failures = []


def fail(msg):
    failures.append(msg)
    print("check_docs: " + msg, file=sys.stderr)


def read(rel):
    with open(os.path.join(HERE, rel), encoding="utf-8") as f:
        return f.read()


def documents():
    """Every Markdown document of the repository (not the test inputs)."""
    docs = ["README.md", "python/README.md", "tests/corpus/README.md", "samples/README.md"]
    for d in ("docs", "bench"):
        docs += sorted(os.path.join(d, f) for f in os.listdir(os.path.join(HERE, d))
                       if f.endswith(".md"))
    return [d for d in docs if os.path.isfile(os.path.join(HERE, d))]


def check_readme():
    text = read("README.md")
    lines = text.count("\n")
    if lines > 150:
        fail("README.md has %d lines (at most 150)" % lines)
    for block in re.findall(r"```sh\n(.*?)```", text, re.S):
        for line in block.splitlines():
            cmd = line.split("#")[0].split()
            if cmd and not os.access(os.path.join(HERE, cmd[0]), os.X_OK):
                fail("README.md runs %s, which is not an executable file here" % cmd[0])
    cli = re.search(r"## Command line\n+```\n(.*?)```", text, re.S)
    if not cli:
        fail("README.md has no command-line block")
        return
    commands = sorted({m for m in re.findall(r"^ptwm (\w+)", cli.group(1), re.M)})
    if len(commands) < 5:
        fail("README.md's command-line block names only %s" % commands)
    ptwm = os.environ.get("PTWM_BIN")
    for c in commands if ptwm else []:
        r = subprocess.run([ptwm, c, "--help"], capture_output=True)
        if r.returncode != 0:
            fail("README.md shows `ptwm %s`, and `ptwm %s --help` exits %d" % (c, c, r.returncode))


def table_rows(text):
    return [l for l in text.splitlines() if l.startswith("| ") and not l.startswith("|---")]


def between(text, name):
    begin, end = "<!-- %s begin -->" % name, "<!-- %s end -->" % name
    if begin not in text or end not in text:
        return None
    return text.split(begin, 1)[1].split(end, 1)[0]


def check_figures():
    with tempfile.TemporaryDirectory() as tmp:
        csv = os.path.join(tmp, "results.csv")
        shutil.copy(os.path.join(HERE, "docs", "bench-results.csv"), csv)
        open(os.path.join(tmp, "machine.txt"), "w").close()
        subprocess.run([sys.executable, os.path.join(HERE, "bench", "suite_report.py"), csv, tmp,
                        "0", "repeat-2048MB.safetensors"], check=True, stdout=subprocess.DEVNULL)
        made = {n: open(os.path.join(tmp, n), encoding="utf-8").read()
                for n in ("README_TABLE.md", "RESULTS_SECTION.md")}
    for doc, marker, gen in (("README.md", "run_suite.sh summary", "README_TABLE.md"),
                             ("bench/RESULTS.md", "run_suite.sh", "RESULTS_SECTION.md")):
        section = between(read(doc), marker)
        if section is None:
            fail("%s has no %s markers" % (doc, marker))
        elif not table_rows(made[gen]):
            fail("bench/suite_report.py made no table for %s" % doc)
        elif table_rows(section) != table_rows(made[gen]):
            fail("%s's tables (%s) are not what docs/bench-results.csv gives" % (doc, marker))


def check_links():
    for doc in documents():
        base = os.path.dirname(os.path.join(HERE, doc))
        for target in LINK.findall(read(doc)):
            if re.match(r"[a-z]+:", target):
                continue
            if not os.path.exists(os.path.normpath(os.path.join(base, target))):
                fail("%s links to %s, which does not exist" % (doc, target))


def check_index():
    index = os.path.join(HERE, "docs")
    listed = {os.path.relpath(os.path.normpath(os.path.join(index, t)), HERE)
              for t in LINK.findall(read("docs/README.md"))}
    for doc in documents():
        if doc != "docs/README.md" and doc not in listed:
            fail("docs/README.md does not list %s" % doc)


def main():
    check_readme()
    check_figures()
    check_links()
    check_index()
    print("check_docs: %s" % ("%d failed" % len(failures) if failures else "ok"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
