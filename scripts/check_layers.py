#!/usr/bin/env python3
"""List every upward dependency between the layers of src/ (docs/ARCHITECTURE.md, "Layers").

Layers, bottom up: platform (src/platform/ with what src/ itself holds: common.h, error.c,
dtype.c, api_sizes.c), codec, container, formats, load. A file may use its own layer and
those below it; anything else is an upward dependency. Two kinds are found:

  includes    each #include "NAME" of src/, resolved as the compiler resolves it (the
              including file's folder, then the include path in CMakeLists.txt's order);
  references  with --objects DIR (a build's object files: build/CMakeFiles, where each
              layer's target ptwm_LAYER.dir holds its layer's, or one such folder),
              each symbol an object file uses that an object of a higher layer defines:
              the calls through include/ptwm.h, which no include shows.

The build refuses an upward include by its include paths (CMakeLists.txt: one target a layer);
this also finds one written as a relative path, and the calls no include shows.

Usage: scripts/check_layers.py [--src DIR] [--objects DIR]
Prints what it found; exit status 0 if nothing is upward, 1 if something is, 2 on bad usage.
"""
import argparse
import os
import re
import subprocess
import sys

# Rank of each layer folder; src/ itself shares the bottom rank with platform.
LAYERS = {"": 0, "platform": 0, "codec": 1, "container": 2, "formats": 3, "load": 4}
# The include path of CMakeLists.txt (PTWM_INTERNAL_INCLUDES), in order.
INCLUDE_ORDER = ["", "platform", "codec", "container", "formats", "load"]
INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def layer_of(src, path):
    """The layer folder of a file under src ("" for src/ itself), or None outside the layers."""
    rel = os.path.relpath(path, src)
    parts = rel.split(os.sep)
    if len(parts) == 1:
        return ""
    return parts[0] if parts[0] in LAYERS else None


def layer_name(layer):
    return "core" if layer == "" else layer


def sources(src):
    for dirpath, _, files in os.walk(src):
        for f in sorted(files):
            if f.endswith((".c", ".h")):
                yield os.path.join(dirpath, f)


def resolve(src, includer, name):
    """The file `#include "name"` in `includer` reads, or None (a system or public header)."""
    for d in [os.path.dirname(includer)] + [os.path.join(src, l) for l in INCLUDE_ORDER]:
        p = os.path.normpath(os.path.join(d, name))
        if os.path.isfile(p):
            return p
    return None


def upward_includes(src):
    found = []
    for path in sources(src):
        own = layer_of(src, path)
        if own is None:
            continue
        with open(path, encoding="utf-8", errors="replace") as f:
            for lineno, line in enumerate(f, 1):
                m = INCLUDE_RE.match(line)
                if not m:
                    continue
                target = resolve(src, path, m.group(1))
                if target is None or not target.startswith(src + os.sep):
                    continue
                to = layer_of(src, target)
                if to is not None and LAYERS[to] > LAYERS[own]:
                    found.append("%s:%d: %s includes \"%s\" (%s, layer %s)" % (
                        os.path.relpath(path, os.path.dirname(src)), lineno, layer_name(own),
                        m.group(1), os.path.relpath(target, os.path.dirname(src)),
                        layer_name(to)))
    return found


def nm(obj, *flags):
    out = subprocess.run(["nm", *flags, obj], check=True, capture_output=True, text=True).stdout
    return out.splitlines()


def upward_references(src, objects):
    """Object files are named for their source (.../src/<layer>/<file>.c.o)."""
    objs = {}
    mark = os.sep + "src" + os.sep
    for dirpath, _, files in os.walk(objects):
        for f in files:
            if f.endswith(".c.o"):
                obj = os.path.join(dirpath, f)
                rel = os.path.relpath(obj, objects)
                if rel.startswith("src" + os.sep):
                    rel = rel[len("src" + os.sep):]
                elif mark in os.sep + rel:
                    rel = (os.sep + rel).split(mark, 1)[1]
                else:
                    continue
                objs[obj] = os.path.join(src, rel[:-2])
    if not objs:
        raise SystemExit("check_layers: no object files (*.c.o) under %s" % objects)
    defined = {}
    for obj, source in objs.items():
        for line in nm(obj, "--defined-only", "--extern-only"):
            parts = line.split()
            if len(parts) == 3:
                defined[parts[2]] = source
    found = {}
    for obj, source in sorted(objs.items(), key=lambda kv: kv[1]):
        own = layer_of(src, source)
        if own is None:
            continue
        for line in nm(obj, "--undefined-only"):
            sym = line.split()[-1]
            target = defined.get(sym)
            to = layer_of(src, target) if target else None
            if to is not None and LAYERS[to] > LAYERS[own]:
                found.setdefault((source, target), []).append(sym)
    top = os.path.dirname(src)
    return ["%s (%s) uses %s of %s (layer %s)" % (
        os.path.relpath(s, top), layer_name(layer_of(src, s)), ", ".join(sorted(syms)),
        os.path.relpath(t, top), layer_name(layer_of(src, t)))
        for (s, t), syms in sorted(found.items())]


def main():
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--src", default=os.path.join(here, "src"), help="the library's src/")
    ap.add_argument("--objects", help="a build's object files of the library "
                    "(build/CMakeFiles)")
    args = ap.parse_args()
    src = os.path.abspath(args.src)
    if not os.path.isdir(src):
        ap.error("no directory %s" % src)
    lists = [("upward includes", upward_includes(src))]
    if args.objects:
        lists.append(("upward references", upward_references(src, os.path.abspath(args.objects))))
    total = 0
    for title, items in lists:
        print("%s: %d" % (title, len(items)))
        for item in items:
            print("  " + item)
        total += len(items)
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
