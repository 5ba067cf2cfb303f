#!/usr/bin/env python3
"""List C functions longer than a limit, and C sources longer than another.

usage: scripts/longfuncs.py [--max-func N] [--max-file M] [--allow NAME]... [--check] [PATH...]
  PATH: files or directories (default: src programs); *.c and *.h under them.
  Prints one line per function over N lines (default 100), longest first:
  lines, file:line, name; and one per source over M lines (default 800).
  --allow NAME: leave out a function of that name or a file of that path
  (repeatable; scripts/test.sh allows none).
  --check: exit 1 if anything is printed (scripts/test.sh runs it so; the
  limits are the project's: docs/ARCHITECTURE.md).

A function is counted from the first line of its declaration (the return
type, which may sit lines above a signature that wraps) to its closing brace
at the end of a top-level block. Comments, strings and character literals are
skipped when braces are matched, so a brace inside them does not count."""
import pathlib
import re
import sys


def strip(text):
    """The text with comments, strings and char literals blanked (newlines kept)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith('/*', i):
            j = text.find('*/', i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r'[^\n]', ' ', text[i:j]))
            i = j
        elif text.startswith('//', i):
            j = text.find('\n', i)
            j = n if j < 0 else j
            out.append(' ' * (j - i))
            i = j
        elif c in '"\'':
            j = i + 1
            while j < n and text[j] != c and text[j] != '\n':
                j += 2 if text[j] == '\\' else 1
            j = min(j + 1, n)
            out.append(c + re.sub(r'[^\n]', ' ', text[i + 1:j - 1]) + c if j - i >= 2 else text[i:j])
            i = j
        else:
            out.append(c)
            i += 1
    return ''.join(out)


def functions(path):
    """(lines, first line, name) of every function defined in path."""
    lines = strip(path.read_text(errors='replace')).split('\n')
    found = []
    depth = 0
    decl = None        # first line of the declaration being read at depth 0
    start = None
    for no, line in enumerate(lines):
        if depth == 0:
            s = line.strip()
            if not s or s.startswith('#'):
                if not s:
                    decl = None
                continue
            if decl is None:
                decl = no
        for ch in line:
            if ch == '{':
                if depth == 0:
                    start = decl
                depth += 1
            elif ch == '}':
                depth -= 1
                if depth == 0 and start is not None:
                    head = ' '.join(lines[start:no + 1])
                    head = head[:head.find('{')]
                    m = re.search(r'(\w+)\s*\([^()]*(\([^()]*\)[^()]*)*\)\s*$', head)
                    if m and not re.match(r'\s*(typedef|struct|enum|union)\b', head) and '=' not in head:
                        found.append((no - start + 1, start + 1, m.group(1)))
                    start = None
        if depth == 0 and (line.rstrip().endswith(';') or line.rstrip().endswith('}')):
            decl = None
    return found


def main(argv):
    max_func, max_file, check, roots, allow = 100, 800, False, [], set()
    it = iter(argv)
    for a in it:
        if a == '--max-func':
            max_func = int(next(it))
        elif a == '--max-file':
            max_file = int(next(it))
        elif a == '--allow':
            allow.add(next(it))
        elif a == '--check':
            check = True
        else:
            roots.append(a)
    files = []
    for r in roots or ['src', 'programs']:
        p = pathlib.Path(r)
        files += [p] if p.is_file() else sorted(p.rglob('*.[ch]'))
    long_funcs, long_files = [], []
    for p in files:
        n = p.read_text(errors='replace').count('\n')
        if p.suffix == '.c' and n > max_file and str(p) not in allow:
            long_files.append((n, str(p)))
        long_funcs += [(k, f'{p}:{line}', name) for k, line, name in functions(p)
                       if k > max_func and name not in allow]
    for k, where, name in sorted(long_funcs, reverse=True):
        print(f'{k:5d} {where} {name}')
    for k, where in sorted(long_files, reverse=True):
        print(f'{k:5d} {where} (file)')
    return 1 if check and (long_funcs or long_files) else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
