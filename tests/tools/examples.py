#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Extract the runnable examples of a document, as a reader would paste them.

  examples.py extract DOC OUTDIR
      write each runnable example of DOC to OUTDIR/NN.sh (01, 02, ... in the order of
      the document) and print one line per example: "NN LINE", LINE being the line of
      DOC where its text starts
  examples.py list DOC
      print each example, preceded by "# DOC:LINE"

Which blocks are examples:
  Markdown (README.md, docs/*.md): a fenced block whose opening line is exactly
      ```sh example
  and that ends at the next line that is exactly ```; its text is taken as it is.
  A man page (*.5, *.8, ...): the .EX ... .EE block right after the comment line
      .\\" example
  Its text is what man(1) prints: the escapes an example may use (\\- \\e \\(aq \\(dq
  \\(ti \\(ha \\(ga \\& \\fB \\fI \\fR \\fP) are replaced by what they print, and anything
  else (another escape, a request, a backslash ending a line) is an error, since man
  would print something else than the text here. When man(1) is installed, each
  example is also looked for in man's own rendering of the page, line for line.

Exits 1 with one line per problem when a block is malformed or not rendered as
extracted, or when DOC has no example at all.
"""
import os
import re
import subprocess
import sys

MD_OPEN = "```sh example"
MD_CLOSE = "```"
ROFF_MARK = re.compile(r'^\.\\"\s*example\s*$')

ROFF_ESCAPES = {
    "\\-": "-",
    "\\e": "\\",
    "\\(aq": "'",
    "\\(dq": '"',
    "\\(ti": "~",
    "\\(ha": "^",
    "\\(ga": "`",
    "\\&": "",
    "\\fB": "",
    "\\fI": "",
    "\\fR": "",
    "\\fP": "",
}
ROFF_ESCAPE = re.compile("|".join(re.escape(k) for k in
                                  sorted(ROFF_ESCAPES, key=len, reverse=True)))


class Problem(Exception):
    pass


def markdown_examples(path, lines):
    """[(first text line number, [text lines])] of the ```sh example blocks."""
    out = []
    i = 0
    while i < len(lines):
        if lines[i].rstrip() == MD_OPEN:
            start = i + 1
            j = start
            while j < len(lines) and lines[j].rstrip() != MD_CLOSE:
                j += 1
            if j == len(lines):
                raise Problem(f"{path}:{i + 1}: example block never closed (no ``` line)")
            out.append((start + 1, lines[start:j]))
            i = j + 1
            continue
        if lines[i].startswith("```") and "example" in lines[i] and lines[i].rstrip() != MD_OPEN:
            raise Problem(f"{path}:{i + 1}: '{lines[i].rstrip()}': an example opens with "
                          f"exactly '{MD_OPEN}'")
        i += 1
    return out


def roff_line(path, no, line):
    """What man prints for one line of an .EX block."""
    if line.startswith(".") or line.startswith("'"):
        raise Problem(f"{path}:{no}: a request inside an example: {line}")
    text = ROFF_ESCAPE.sub(lambda m: ROFF_ESCAPES[m.group(0)], line)
    # Whatever backslash is left is an escape this tool does not know, or a trailing one
    # (a roff line continuation): man would not print the line as written here.
    rest = ROFF_ESCAPE.sub("", line)
    if "\\" in rest:
        bad = rest[rest.index("\\"):][:4]
        raise Problem(f"{path}:{no}: escape '{bad}' in an example: write \\e for a "
                      f"backslash, \\- for a minus")
    return text


def roff_examples(path, lines):
    """[(first text line number, [text lines])] of the marked .EX blocks."""
    out = []
    i = 0
    while i < len(lines):
        if ROFF_MARK.match(lines[i]):
            j = i + 1
            while j < len(lines) and lines[j].startswith('.\\"'):
                j += 1
            if j == len(lines) or lines[j].rstrip() != ".EX":
                raise Problem(f"{path}:{i + 1}: the example mark is not followed by .EX")
            start = j + 1
            k = start
            text = []
            while k < len(lines) and lines[k].rstrip() != ".EE":
                if not lines[k].startswith('.\\"'):
                    text.append(roff_line(path, k + 1, lines[k]))
                k += 1
            if k == len(lines):
                raise Problem(f"{path}:{j + 1}: .EX without .EE")
            out.append((start + 1, text))
            i = k + 1
            continue
        i += 1
    return out


def man_rendering(path):
    """The page as man prints it to a pipe, one line a list item; None without man."""
    env = dict(os.environ, MANWIDTH="200", LC_ALL="C.UTF-8")
    env.pop("MAN_KEEP_FORMATTING", None)
    try:
        r = subprocess.run(["man", "-l", path], capture_output=True, text=True, env=env,
                           check=False)
    except FileNotFoundError:
        return None
    if r.returncode != 0:
        raise Problem(f"{path}: man -l failed: {r.stderr.strip()}")
    return r.stdout.split("\n")


def rendered_as_extracted(rendered, text):
    """TEXT appears in RENDERED as consecutive lines, all under one indentation."""
    first = text[0]
    for i, line in enumerate(rendered):
        if not line.endswith(first) or line[:len(line) - len(first)].strip():
            continue
        pad = line[:len(line) - len(first)]
        if i + len(text) > len(rendered):
            continue
        if all(rendered[i + n].rstrip() == (pad + t).rstrip() if t.strip() else
               not rendered[i + n].strip() for n, t in enumerate(text)):
            return True
    return False


def examples(path):
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    if re.search(r"\.[1-9]$", path):
        found = roff_examples(path, lines)
        rendered = man_rendering(path)
        if rendered is not None:
            for no, text in found:
                if text and not rendered_as_extracted(rendered, text):
                    raise Problem(f"{path}:{no}: man prints this example differently "
                                  f"from the text extracted here")
    else:
        found = markdown_examples(path, lines)
    if not found:
        raise Problem(f"{path}: no example (```sh example blocks, or .\\\" example before .EX)")
    return found


def main(argv):
    if len(argv) == 4 and argv[1] == "extract":
        path, out = argv[2], argv[3]
        try:
            found = examples(path)
        except Problem as e:
            print(e, file=sys.stderr)
            return 1
        os.makedirs(out, exist_ok=True)
        for n, (no, text) in enumerate(found, 1):
            with open(os.path.join(out, f"{n:02d}.sh"), "w", encoding="utf-8") as f:
                f.write("\n".join(text) + "\n")
            print(f"{n:02d} {no}")
        return 0
    if len(argv) == 3 and argv[1] == "list":
        try:
            found = examples(argv[2])
        except Problem as e:
            print(e, file=sys.stderr)
            return 1
        for no, text in found:
            print(f"# {argv[2]}:{no}")
            print("\n".join(text))
        return 0
    print(__doc__.split("\n\n")[1], file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
