#!/usr/bin/env python3
"""Put generated text between the markers <!-- NAME begin --> and <!-- NAME end --> of a file.

Usage: bench/put_section.py FILE NAME TEXT_FILE
The markers stay; what lay between them is replaced by TEXT_FILE's contents. Exit status 1
(and the file untouched) when FILE lacks either marker. bench/run_suite.sh and
bench/bench_disk.sh keep README.md's table and bench/RESULTS.md's sections this way.
"""
import sys


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__.strip().splitlines()[2])
    path, name, text = sys.argv[1], sys.argv[2], open(sys.argv[3]).read()
    begin, end = "<!-- %s begin -->" % name, "<!-- %s end -->" % name
    doc = open(path).read()
    if begin not in doc or end not in doc.split(begin, 1)[1]:
        sys.exit("%s has no %s ... %s markers" % (path, begin, end))
    head, rest = doc.split(begin, 1)
    tail = rest.split(end, 1)[1]
    if text and not text.endswith("\n"):
        text += "\n"
    open(path, "w").write(head + begin + "\n" + text + end + tail)


if __name__ == "__main__":
    main()
