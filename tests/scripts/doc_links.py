#!/usr/bin/env python3
"""Checks the relative links of Markdown files: every link and image target must name a file
or folder that exists, and every #anchor into a Markdown file must match one of its headings.

Usage: doc_links.py ROOT [FILE.md | FOLDER]...  (folders: every *.md under them)
Prints one line per broken link (file:line: target: why) and exits 1 if there is one, 2 on
bad arguments, 0 otherwise. Absolute URLs (http:, mailto:, ...) are not checked.

Anchors follow GitHub's rule for heading ids: the heading's text as rendered (code spans
keep their text, links their label, '*' marks go), lowercased, every character that is
not a letter, digit, space, '-' or '_' dropped, each space made '-'; a repeated heading
gets '-1', '-2', ... Explicit <a name="..."> / id="..." anchors count too.
"""
import os
import re
import sys

FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
INLINE_CODE = re.compile(r"(`+)(.+?)\1")
# [text](target) and ![alt](target); the target may be <...> and may carry a "title".
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*(<[^>]*>|[^\s)]+)(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE = re.compile(r"^ {0,3}\[[^\]]+\]:\s*(\S+)")
HTML_ANCHOR = re.compile(r"<a\s+[^>]*(?:name|id)=\"([^\"]+)\"|\sid=\"([^\"]+)\"")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def slug(heading_text):
    text = INLINE_CODE.sub(lambda m: m.group(2), heading_text)
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)   # links and images: their label
    text = re.sub(r"<[^>]+>", "", text)                       # inline HTML
    text = text.replace("*", "").lower()                      # emphasis marks
    text = "".join(c for c in text if c.isalnum() or c in " -_")
    return text.replace(" ", "-")


def outside_code(lines):
    """Yields (line number, line) of the lines outside fenced code blocks."""
    fenced = False
    for number, line in enumerate(lines, 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield number, line


def anchors_of(path, cache={}):
    if path not in cache:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
        seen, anchors = {}, set()
        for _, line in outside_code(lines):
            m = HEADING.match(line)
            if m:
                base = slug(m.group(2))
                n = seen.get(base, 0)
                seen[base] = n + 1
                anchors.add(base if n == 0 else f"{base}-{n}")
            for m in HTML_ANCHOR.finditer(line):
                anchors.add(m.group(1) or m.group(2))
        cache[path] = anchors
    return cache[path]


def check(path, root):
    """Returns the broken links of one Markdown file as 'file:line: target: why' lines."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    broken = []
    for number, line in outside_code(lines):
        line = INLINE_CODE.sub(lambda m: " " * len(m.group(0)), line)
        targets = [m.group(1) for m in LINK.finditer(line)]
        targets += [m.group(1) for m in REFERENCE.finditer(line)]
        for target in targets:
            target = target.strip("<>")
            if SCHEME.match(target):
                continue
            file_part, _, anchor = target.partition("#")
            resolved = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) \
                if file_part else path
            where = f"{os.path.relpath(path, root)}:{number}: {target}"
            if not os.path.exists(resolved):
                broken.append(f"{where}: no such file {os.path.relpath(resolved, root)}")
            elif anchor and resolved.endswith(".md") and os.path.isfile(resolved) \
                    and anchor not in anchors_of(resolved):
                broken.append(f"{where}: no heading with the anchor #{anchor} in "
                              f"{os.path.relpath(resolved, root)}")
    return broken


def main(argv):
    if len(argv) < 3 or not os.path.isdir(argv[1]):
        print("usage: doc_links.py ROOT FILE.md|FOLDER...", file=sys.stderr)
        return 2
    root = argv[1]
    files = []
    for name in argv[2:]:
        path = os.path.join(root, name)
        if os.path.isdir(path):
            files += sorted(os.path.join(d, f) for d, _, fs in os.walk(path)
                            for f in fs if f.endswith(".md"))
        elif os.path.isfile(path):
            files.append(path)
        else:
            print(f"doc_links.py: no such file or folder: {path}", file=sys.stderr)
            return 2
    broken = [b for f in files for b in check(f, root)]
    for b in broken:
        print(b)
    print(f"doc_links.py: {len(files)} files, {len(broken)} broken links")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
