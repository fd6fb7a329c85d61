#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Check that a man page documents what the code has.

  check_man.py options PAGE SECTION[,SECTION...] HELP_FILE
      every option of a --help text (HELP_FILE) is the tag of a .TP entry
      under one of the .SH SECTIONs of PAGE
  check_man.py commands PAGE SECTION NAME...
      every NAME is the first word of a .TP tag under .SH SECTION
  check_man.py keys PAGE FACTS_FILE
      every "key" line of tests/tools/doc_facts.c's output is a .TP entry
      under .SS "[section]" of PAGE, whose text says "Default: VALUE" and,
      exactly for the reloadable keys, "Reloaded on SIGHUP"; and PAGE has no
      key entry the code does not know
  check_man.py reload PAGE SECTION TAG FACTS_FILE
      the .TP entry TAG under .SH SECTION names every reloadable key

Prints one line per problem and exits 1 when there is any, 0 otherwise.
The roff is read the way man(7) lays it out: .B and .I join their words
with spaces, .BR, .BI and the other alternating macros join them without.
"""
import re
import sys

ALTERNATING = {"BR", "BI", "IB", "IR", "RB", "RI"}
JOINED = {"B", "I", "SM", "SB"}


def roff_args(text):
    """Split macro arguments like roff: blanks separate, double quotes group."""
    args, cur, quoted, i, have = [], [], False, 0, False
    while i < len(text):
        ch = text[i]
        if quoted:
            if ch == '"':
                if i + 1 < len(text) and text[i + 1] == '"':
                    cur.append('"')
                    i += 1
                else:
                    quoted = False
            else:
                cur.append(ch)
        elif ch == '"':
            quoted, have = True, True
        elif ch in " \t":
            if cur or have:
                args.append("".join(cur))
            cur, have = [], False
        else:
            cur.append(ch)
        i += 1
    if cur or have:
        args.append("".join(cur))
    return args


def plain(text):
    """Drop font changes and turn the common escapes into what they print."""
    text = re.sub(r"\\f(\[[^]]*\]|\(..|.)", "", text)
    text = re.sub(r"\\\((lq|rq)", '"', text)
    text = re.sub(r"\\\(em", "--", text)
    text = re.sub(r"\\\(aq", "'", text)
    text = text.replace("\\-", "-").replace("\\&", "").replace("\\c", "")
    text = text.replace("\\e", "\\").replace("\\ ", " ")
    return text


def render(line):
    """One source line as the words it prints (None for requests that print nothing)."""
    if line.startswith(".\\\"") or line.startswith("'\\\""):
        return None
    if not line.startswith("."):
        return plain(line)
    m = re.match(r"\.(\S+)\s*(.*)", line)
    if not m:
        return None
    macro, rest = m.group(1), m.group(2)
    if macro in JOINED:
        return plain(" ".join(roff_args(rest)))
    if macro in ALTERNATING:
        return plain("".join(roff_args(rest)))
    return None


class Page:
    """The .TP entries of a page: (SH, SS, tag text, body text), in order."""

    def __init__(self, path):
        self.entries = []
        sh = ss = None
        tag = None
        body = []
        want_tag = False
        with open(path, encoding="utf-8") as f:
            lines = f.read().split("\n")

        def close():
            if tag is not None:
                self.entries.append((sh, ss, tag, " ".join(body)))

        for line in lines:
            m = re.match(r"\.(SH|SS)\s+(.*)", line)
            if m:
                close()
                tag, body, want_tag = None, [], False
                title = " ".join(roff_args(m.group(2)))
                if m.group(1) == "SH":
                    sh, ss = title, None
                else:
                    ss = title
                continue
            if re.match(r"\.(TP|PP|P|LP)\b", line):
                close()
                tag, body = None, []
                want_tag = line.startswith(".TP")
                continue
            text = render(line)
            if text is None:
                continue
            if want_tag:
                tag, want_tag = text.strip(), False
            elif tag is not None:
                body.append(text.strip())
        close()

    def tags(self, sh, ss=None):
        return [(t, b) for (h, s, t, b) in self.entries if h == sh and (ss is None or s == ss)]


def help_options(path):
    """The option words of a --help text: -x and --long at the start of a line."""
    opts = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            stripped = line.strip()
            if not stripped.startswith("-"):
                continue
            spec = re.split(r"\s{2,}", stripped)[0]
            opts += re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", spec)
    return opts


def tag_options(tag):
    return set(re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", tag))


def read_facts(path):
    keys = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            fields = line.rstrip("\n").split("\t")
            if fields[0] == "key":
                section, key, _type, default, reload = fields[1:6]
                keys.append((section, key, default, reload == "yes"))
    return keys


def check_options(page, sections, help_file):
    documented = set()
    for section in sections.split(","):
        for tag, _ in page.tags(section):
            documented |= tag_options(tag)
    opts = help_options(help_file)
    if not opts:
        return ["no options found in %s" % help_file]
    return ["option %s is not documented under %s" % (o, sections)
            for o in opts if o not in documented]


def check_commands(page, section, names):
    first = {t.split()[0] for t, _ in page.tags(section) if t.split()}
    return ["command %s is not documented under %s" % (n, section)
            for n in names if n not in first]


def check_keys(page, facts_file):
    problems = []
    keys = read_facts(facts_file)
    if not keys:
        return ["no keys in %s" % facts_file]
    known = set()
    for section, key, default, reload in keys:
        ss = "[%s]" % section
        known.add((ss, key))
        found = [b for t, b in page.tags("KEYS", ss) if t.split() and t.split()[0] == key]
        if not found:
            problems.append("key [%s] %s is not documented under KEYS %s" % (section, key, ss))
            continue
        body = found[0]
        want = {"-": "none", '""': "empty"}.get(default, default)
        if not re.search(r"Default: %s(?=[.;,]|$)" % re.escape(want), body):
            problems.append("key [%s] %s: its text does not say \"Default: %s\""
                            % (section, key, want))
        says_reload = "Reloaded on SIGHUP" in body
        if reload and not says_reload:
            problems.append("key [%s] %s is reloaded on SIGHUP, its text does not say so"
                            % (section, key))
        if says_reload and not reload:
            problems.append("key [%s] %s is not reloaded on SIGHUP, its text says it is"
                            % (section, key))
    for (_, ss, tag, _) in [e for e in page.entries if e[0] == "KEYS"]:
        word = tag.split()[0] if tag.split() else ""
        if (ss, word) not in known:
            problems.append("KEYS %s documents \"%s\", which the code does not have" % (ss, word))
    return problems


def check_reload(page, section, tag_word, facts_file):
    bodies = [b for t, b in page.tags(section) if t.split() and t.split()[0] == tag_word]
    if not bodies:
        return ["no %s entry under %s" % (tag_word, section)]
    return ["%s under %s does not name the reloadable key %s" % (tag_word, section, key)
            for (_, key, _, reload) in read_facts(facts_file)
            if reload and not re.search(r"(?<![\w])%s(?![\w])" % re.escape(key), bodies[0])]


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    what, page = argv[1], Page(argv[2])
    if what == "options" and len(argv) == 5:
        problems = check_options(page, argv[3], argv[4])
    elif what == "commands" and len(argv) >= 5:
        problems = check_commands(page, argv[3], argv[4:])
    elif what == "keys" and len(argv) == 4:
        problems = check_keys(page, argv[3])
    elif what == "reload" and len(argv) == 6:
        problems = check_reload(page, argv[3], argv[4], argv[5])
    else:
        print(__doc__, file=sys.stderr)
        return 2
    for p in problems:
        print("%s: %s" % (argv[2], p))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
