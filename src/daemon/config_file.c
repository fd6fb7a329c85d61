// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * config_file.c - the INI file: what iniparser read, checked key by key, each
 * message naming the line it is about.
 *
 * iniparser 4.1 keeps "section" and "section:key" entries and no line
 * numbers. Loading a file takes three steps.
 *
 * 1. The scan reads the file a second time, line by line the way iniparser
 *    does (fgets() into the same 1024-byte buffer, a trailing '\' joining
 *    the next line, the same trimming and lowercasing, a header's name ending
 *    at the first ']'), and notes every section header and every "key ="
 *    line with its line number. It serves the messages (line numbers, and
 *    the wording of iniparser's syntax errors) and it shows what iniparser's
 *    public API cannot list: keys before the first section (iniparser stores
 *    them as ":key", in no section) and headers whose name holds a ':' or is
 *    empty.
 *
 * 2. The items to check: every header and every key before any section, from
 *    the scan; every section iniparser lists (iniparser_getnsec/getsecname)
 *    and, in each known one, every key (iniparser_getsecnkeys/getseckeys)
 *    with the value iniparser_getstring() gives, so nothing iniparser read
 *    goes unchecked even where the scan disagrees. A key's line is the last
 *    line that set it (iniparser keeps the last value); a section's is its
 *    first header.
 *
 * 3. The items, sorted by line (stably; one the scan could not place goes
 *    last), are checked and applied in that order, stopping at the first
 *    error: the message is about the first bad line of the file, whatever
 *    order the dictionary keeps.
 *
 * Messages: "FILE:LINE: [queue] colour = \"blue\": unknown key". iniparser
 * reports syntax errors through a process-wide callback; ours keeps the
 * first message in a thread-local buffer, used when the scan finds no bad
 * line itself. If the file changes between the two reads, only line numbers
 * in messages can be wrong: values always come from iniparser.
 */
#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <iniparser.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "config_int.h"

/* iniparser's line buffer (ASCIILINESZ): a line of the file holds at most this - 2 bytes. */
#define INI_LINE_MAX 1024

/* ---- the scan --------------------------------------------------------- */

/* A section header or a "key = value" line, as iniparser reads it. */
struct scan_line {
	unsigned int line; /* first line of the file it spans */
	bool header;
	char *entry; /* "section" for a header, else "section:key" as iniparser stores it */
	size_t seclen;
};

struct scan {
	struct scan_line *v;
	size_t n;
	size_t cap;
	unsigned int bad_line;	     /* first line iniparser rejects, or 0 */
	bool too_long;		     /* ... for being too long */
	char bad_text[INI_LINE_MAX]; /* the rejected line, trimmed */
};

/* Trim blanks at both ends of @s in place (iniparser's strstrip). Return: @s's new start. */
static char *trim(char *s)
{
	char *end;

	while (*s && isspace((unsigned char)*s))
		s++;
	end = s + strlen(s);
	while (end > s && isspace((unsigned char)end[-1]))
		end--;
	*end = '\0';
	return s;
}

static void lower(char *s)
{
	for (; *s; s++)
		*s = (char)tolower((unsigned char)*s);
}

static int scan_push(struct scan *sc, unsigned int line, bool header, const char *section,
		     const char *key)
{
	struct scan_line *l;

	if (sc->n == sc->cap) {
		size_t cap = sc->cap ? 2 * sc->cap : 32;
		struct scan_line *grown = realloc(sc->v, cap * sizeof(*grown));

		if (!grown)
			return -ENOMEM;
		sc->v = grown;
		sc->cap = cap;
	}
	l = &sc->v[sc->n];
	*l = (struct scan_line){.line = line, .header = header, .seclen = strlen(section)};
	if (header)
		l->entry = strdup(section);
	else if (asprintf(&l->entry, "%s:%s", section, key) < 0)
		l->entry = NULL;
	if (!l->entry)
		return -ENOMEM;
	sc->n++;
	return 0;
}

/*
 * One logical line, iniparser_line()'s way: blank, comment (';' or '#'),
 * header ('[' ... ']'), "key = value" (a '=' not in first place), or else an
 * error. @section is the current section, updated by a header.
 */
static int scan_one(struct scan *sc, char *text, unsigned int line, char *section)
{
	char *s = trim(text);
	size_t len = strlen(s);
	char *eq;

	if (len == 0 || s[0] == ';' || s[0] == '#')
		return 0;
	if (s[0] == '[' && s[len - 1] == ']') {
		char *name = s + 1;

		*strchr(name, ']') = '\0';
		if (*name) {
			name = trim(name);
			lower(name);
			memmove(section, name, strlen(name) + 1);
		} else {
			/*
			 * sscanf("[%[^]]") matches nothing in "[]...": iniparser keeps
			 * the section, trimmed, then lowercased "up to the line's
			 * length - 1", which cuts it there.
			 */
			memmove(section, trim(section), strlen(trim(section)) + 1);
			if (strlen(section) > len - 1)
				section[len - 1] = '\0';
		}
		return scan_push(sc, line, true, *name ? section : "", NULL);
	}
	eq = strchr(s, '=');
	if (eq && eq != s) {
		*eq = '\0';
		s = trim(s);
		lower(s);
		return scan_push(sc, line, false, section, s);
	}
	if (!sc->bad_line) {
		sc->bad_line = line;
		snprintf(sc->bad_text, sizeof(sc->bad_text), "%s", s);
	}
	return 0;
}

/* Read @f from its start as iniparser_load() does. Return: 0 or -ENOMEM. */
static int scan_file(struct scan *sc, FILE *f)
{
	char text[INI_LINE_MAX + 1] = "";
	char section[INI_LINE_MAX + 1] = "";
	unsigned int lineno = 0;
	unsigned int first = 0;
	size_t last = 0;
	int ret = 0;

	rewind(f);
	while (ret == 0 && fgets(text + last, (int)(INI_LINE_MAX - last), f)) {
		size_t len = strlen(text);

		lineno++;
		if (last == 0)
			first = lineno;
		/* iniparser skips a line of one byte (or none, before a NUL). */
		if (len <= 1)
			continue;
		len--;
		if (text[len] != '\n' && !feof(f)) {
			if (!sc->bad_line) {
				sc->bad_line = lineno;
				sc->too_long = true;
			}
			break;
		}
		while (len > 0 && (text[len] == '\n' || isspace((unsigned char)text[len])))
			text[len--] = '\0';
		if (len == 0 && (text[0] == '\n' || isspace((unsigned char)text[0])))
			text[0] = '\0';
		/* A trailing backslash: the next line is read over it. */
		if (text[len] == '\\') {
			last = len;
			continue;
		}
		last = 0;
		ret = scan_one(sc, text, first, section);
		memset(text, 0, sizeof(text));
	}
	return ret;
}

static void scan_free(struct scan *sc)
{
	for (size_t i = 0; i < sc->n; i++)
		free(sc->v[i].entry);
	free(sc->v);
}

/* Return: the line of the first header named @name, or 0. */
static unsigned int header_line(const struct scan *sc, const char *name)
{
	for (size_t i = 0; i < sc->n; i++)
		if (sc->v[i].header && strcmp(sc->v[i].entry, name) == 0)
			return sc->v[i].line;
	return 0;
}

/* Return: the last line that set the dictionary entry @entry ("section:key"), or 0. */
static unsigned int key_line(const struct scan *sc, const char *entry)
{
	for (size_t i = sc->n; i-- > 0;)
		if (!sc->v[i].header && strcmp(sc->v[i].entry, entry) == 0)
			return sc->v[i].line;
	return 0;
}

/* ---- the items -------------------------------------------------------- */

enum item_kind {
	ITEM_SECTION, /* a section name: must be known */
	ITEM_OUTSIDE, /* a key before any section: always an error */
	ITEM_KEY,     /* a dictionary entry "section:key" of a known section */
};

struct item {
	unsigned int line; /* 0: not found by the scan */
	size_t order;	   /* for a stable sort */
	enum item_kind kind;
	const char *name;    /* section name, key, or dictionary entry */
	const char *section; /* ITEM_KEY: the known section (static) */
};

struct loader {
	struct td_config *c;
	const char *path;
	dictionary *d;
	struct scan scan;
	struct item *items;
	size_t nr_items;
	size_t cap_items;
	char *err;
	size_t errlen;
};

static int add_item(struct loader *l, enum item_kind kind, unsigned int line, const char *name,
		    const char *section)
{
	if (l->nr_items == l->cap_items) {
		size_t cap = l->cap_items ? 2 * l->cap_items : 64;
		struct item *grown = realloc(l->items, cap * sizeof(*grown));

		if (!grown)
			return -ENOMEM;
		l->items = grown;
		l->cap_items = cap;
	}
	l->items[l->nr_items] = (struct item){
	    .line = line, .order = l->nr_items, .kind = kind, .name = name, .section = section};
	l->nr_items++;
	return 0;
}

static int item_cmp(const void *pa, const void *pb)
{
	const struct item *a = pa;
	const struct item *b = pb;
	unsigned int la = a->line ? a->line : UINT_MAX;
	unsigned int lb = b->line ? b->line : UINT_MAX;

	if (la != lb)
		return la < lb ? -1 : 1;
	return a->order < b->order ? -1 : a->order > b->order;
}

/* The keys iniparser holds in the known section @sec. */
static int add_section_keys(struct loader *l, const char *sec)
{
	int n = iniparser_getsecnkeys(l->d, sec);
	const char **keys;
	int ret = 0;

	if (n <= 0)
		return 0;
	keys = calloc((size_t)n, sizeof(*keys));
	if (!keys)
		return -ENOMEM;
	if (iniparser_getseckeys(l->d, sec, keys))
		for (int i = 0; i < n && ret == 0; i++)
			ret = add_item(l, ITEM_KEY, key_line(&l->scan, keys[i]), keys[i], sec);
	free(keys);
	return ret;
}

static int collect(struct loader *l)
{
	int nsec = iniparser_getnsec(l->d);
	int ret = 0;

	for (size_t i = 0; i < l->scan.n && ret == 0; i++) {
		const struct scan_line *s = &l->scan.v[i];

		if (s->header)
			ret = add_item(l, ITEM_SECTION, s->line, s->entry, NULL);
		else if (s->seclen == 0)
			ret = add_item(l, ITEM_OUTSIDE, s->line, s->entry + 1, NULL);
	}
	for (int i = 0; i < nsec && ret == 0; i++) {
		const char *name = iniparser_getsecname(l->d, i);
		const char *sec;

		if (!name)
			continue;
		sec = td_cfg_find_section(name, strlen(name));
		if (sec)
			ret = add_section_keys(l, sec);
		else
			ret = add_item(l, ITEM_SECTION, header_line(&l->scan, name), name, NULL);
	}
	return ret;
}

static int check_section(struct loader *l, const struct item *it, const struct td_cfg_where *w)
{
	char name[TD_CFG_QUOTE_MAX], subject[TD_CFG_QUOTE_MAX + 2], known[128];

	if (td_cfg_find_section(it->name, strlen(it->name)))
		return 0;
	snprintf(subject, sizeof(subject), "[%s]", td_cfg_escape(it->name, name, sizeof(name)));
	return td_cfg_bad_entry(w, subject, NULL, l->err, l->errlen, "unknown section %s",
				td_cfg_known_sections(known, sizeof(known)));
}

static int check_outside(struct loader *l, const struct item *it, const struct td_cfg_where *w)
{
	char entry[INI_LINE_MAX + 2], name[TD_CFG_QUOTE_MAX], homes[128];
	const char *value;

	snprintf(entry, sizeof(entry), ":%s", it->name);
	value = iniparser_getstring(l->d, entry, NULL);
	td_cfg_escape(it->name, name, sizeof(name));
	if (td_cfg_key_homes(it->name, homes, sizeof(homes)))
		return td_cfg_bad_entry(w, name, value, l->err, l->errlen,
					"key outside any section (it belongs in %s)", homes);
	return td_cfg_bad_entry(w, name, value, l->err, l->errlen, "key outside any section");
}

static int check_key(struct loader *l, const struct item *it, const struct td_cfg_where *w)
{
	const char *key = it->name + strlen(it->section) + 1;
	const char *value = iniparser_getstring(l->d, it->name, NULL);
	char name[TD_CFG_QUOTE_MAX], subject[TD_CFG_QUOTE_MAX + 32], homes[128];
	enum td_cfg_key id;

	/* A section's own entry ("[disk:x]" is "disk:x", without a value): its header says it. */
	if (!value && header_line(&l->scan, it->name)) {
		struct item sec = {.name = it->name};

		return check_section(l, &sec, w);
	}
	id = td_cfg_find_key(it->section, key);
	if (id < NR_KEYS) {
		if (!value)
			value = "";
		return td_cfg_set_value(l->c, id, value, w, l->err, l->errlen);
	}
	snprintf(subject, sizeof(subject), "[%s] %s", it->section,
		 td_cfg_escape(key, name, sizeof(name)));
	if (td_cfg_key_homes(key, homes, sizeof(homes)))
		return td_cfg_bad_entry(w, subject, value, l->err, l->errlen,
					"unknown key in [%s] (it belongs in %s)", it->section,
					homes);
	return td_cfg_bad_entry(w, subject, value, l->err, l->errlen, "unknown key");
}

static int check_items(struct loader *l)
{
	int ret = 0;

	if (l->nr_items) /* an empty file has none, and no array */
		qsort(l->items, l->nr_items, sizeof(*l->items), item_cmp);
	for (size_t i = 0; i < l->nr_items && ret == 0; i++) {
		const struct item *it = &l->items[i];
		struct td_cfg_where w = {.file = l->path, .line = it->line};

		switch (it->kind) {
		case ITEM_SECTION:
			ret = check_section(l, it, &w);
			break;
		case ITEM_OUTSIDE:
			ret = check_outside(l, it, &w);
			break;
		case ITEM_KEY:
			ret = check_key(l, it, &w);
			break;
		}
	}
	return ret;
}

/* ---- iniparser's own errors ------------------------------------------- */

static __thread char ini_error[512];

static int ini_error_cb(const char *fmt, ...) td_printf(1, 2);

/* iniparser's error callback: keep the first message of a load. */
static int ini_error_cb(const char *fmt, ...)
{
	va_list ap;
	int ret = 0;

	if (ini_error[0])
		return 0;
	va_start(ap, fmt);
	ret = vsnprintf(ini_error, sizeof(ini_error), fmt, ap);
	va_end(ap);
	return ret;
}

/*
 * iniparser's messages read "iniparser: syntax error in F (N):\n-> LINE\n";
 * make them one line without the library's name.
 */
static void tidy_ini_error(char *msg)
{
	static const char prefix[] = "iniparser: ";
	char *w = msg;

	if (strncmp(msg, prefix, sizeof(prefix) - 1) == 0)
		memmove(msg, msg + sizeof(prefix) - 1, strlen(msg + sizeof(prefix) - 1) + 1);
	for (const char *r = msg; *r; r++) {
		if (*r == '\n') {
			if (strncmp(r + 1, "-> ", 3) == 0)
				r += 3;
			if (r[1] && w > msg && w[-1] != ' ')
				*w++ = ' ';
			continue;
		}
		*w++ = *r;
	}
	*w = '\0';
	while (w > msg && w[-1] == ' ')
		*--w = '\0';
}

/* iniparser refused the file: say which line, from the scan when it found it. */
static int syntax_error(struct loader *l, FILE *f)
{
	struct td_cfg_where w = {.file = l->path};
	char quoted[TD_CFG_QUOTE_MAX];
	int ret;

	ret = scan_file(&l->scan, f);
	if (ret)
		return td_cfg_nomem(l->err, l->errlen);
	w.line = l->scan.bad_line;
	if (w.line && l->scan.too_long)
		return td_cfg_bad_entry(&w, "line too long", NULL, l->err, l->errlen,
					"iniparser reads at most %d bytes per line,"
					" continuation lines included",
					INI_LINE_MAX - 2);
	if (w.line)
		return td_cfg_bad_entry(&w, "syntax error", NULL, l->err, l->errlen,
					"\"%s\" is not a [section], key = value or comment line",
					td_cfg_escape(l->scan.bad_text, quoted, sizeof(quoted)));
	tidy_ini_error(ini_error);
	td_cfg_escape(l->path, quoted, sizeof(quoted));
	return td_cfg_fail(l->err, l->errlen, "config file \"%s\": %s", quoted,
			   ini_error[0] ? ini_error : "cannot be read");
}

/* ---- loading ---------------------------------------------------------- */

/* From now on, line numbers in @c's origins refer to @path. */
static int set_origin_file(struct td_config *c, const char *path)
{
	char *copy = strdup(path);

	if (!copy)
		return -ENOMEM;
	free(c->origin_file);
	c->origin_file = copy;
	for (size_t i = 0; i < NR_KEYS; i++)
		c->origin[i].line = 0;
	return 0;
}

int td_config_load_file(struct td_config *c, const char *path, char *err, size_t errlen)
{
	struct loader l = {.c = c, .path = path, .err = err, .errlen = errlen};
	char qp[TD_CFG_QUOTE_MAX];
	struct stat st;
	FILE *f;
	int ret;
	int fd;

	td_cfg_escape(path, qp, sizeof(qp));
	/* iniparser says only "cannot open" and reads a directory as an empty file. */
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return td_cfg_fail(err, errlen, "config file \"%s\": %s", qp, strerror(errno));
	if (fstat(fd, &st) < 0) {
		ret = td_cfg_fail(err, errlen, "config file \"%s\": %s", qp, strerror(errno));
		close(fd);
		return ret;
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		return td_cfg_fail(err, errlen, "config file \"%s\": not a regular file", qp);
	}
	f = fdopen(fd, "r");
	if (!f) {
		close(fd);
		return td_cfg_nomem(err, errlen);
	}

	ini_error[0] = '\0';
	iniparser_set_error_callback(ini_error_cb);
	l.d = iniparser_load(path);
	iniparser_set_error_callback(NULL);
	if (!l.d) {
		ret = syntax_error(&l, f);
		goto out_free_scan;
	}
	if (set_origin_file(c, path) || scan_file(&l.scan, f) || collect(&l)) {
		ret = td_cfg_nomem(err, errlen);
		goto out_free_items;
	}
	ret = check_items(&l);

out_free_items:
	free(l.items);
	iniparser_freedict(l.d);
out_free_scan:
	scan_free(&l.scan);
	fclose(f);
	return ret;
}
