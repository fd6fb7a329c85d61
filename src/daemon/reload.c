// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * reload.c - SIGHUP: compare the settings again and apply the live ones (see reload.h).
 *
 * Two comparisons with td_config_diff(): the new settings against the last
 * load's, for the keys applied here, and against the running ones, for every
 * other key. Each live key has an applier below; a key the table marks
 * reloadable without one is treated as needing a restart, so no change is
 * ever dropped in silence.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "common/log.h"
#include "daemon/daemon.h"
#include "daemon/reload.h"
#include "tagdisk/queue.h"

/* The keys applied here, in groups that change together. */
enum live_group {
	LIVE_NONE,
	LIVE_ELEVATOR,
	LIVE_DEPTH,
	LIVE_TUNABLES,
	LIVE_TIMEOUT,
	LIVE_SHUTDOWN,
};

static const struct {
	const char *section;
	const char *key;
	enum live_group group;
} live_keys[] = {
	{ "queue", "elevator", LIVE_ELEVATOR },
	{ "tags", "depth", LIVE_DEPTH },
	{ "queue", "read_expire_ms", LIVE_TUNABLES },
	{ "queue", "write_expire_ms", LIVE_TUNABLES },
	{ "queue", "fifo_batch", LIVE_TUNABLES },
	{ "queue", "writes_starved", LIVE_TUNABLES },
	{ "drive", "command_timeout_ms", LIVE_TIMEOUT },
	{ "drive", "max_retries", LIVE_TIMEOUT },
	{ "drive", "shutdown_timeout_ms", LIVE_SHUTDOWN },
};

/* Return: the group that applies @k, or LIVE_NONE when a change needs a restart. */
static enum live_group live_group(const struct td_config_key *k)
{
	if (!k->reloadable)
		return LIVE_NONE;
	for (size_t i = 0; i < TD_ARRAY_SIZE(live_keys); i++)
		if (strcmp(k->section, live_keys[i].section) == 0 &&
		    strcmp(k->key, live_keys[i].key) == 0)
			return live_keys[i].group;
	return LIVE_NONE;
}

static bool key_is(const struct td_config_key *k, const char *key)
{
	return strcmp(k->key, key) == 0;
}

/* Copy the live keys' values of @from into @to. */
static void copy_live(struct td_config *to, const struct td_config *from)
{
	memcpy(to->elevator, from->elevator, sizeof(to->elevator));
	to->depth = from->depth;
	to->tunables = from->tunables;
	to->command_timeout_ms = from->command_timeout_ms;
	to->max_retries = from->max_retries;
	to->shutdown_timeout_ms = from->shutdown_timeout_ms;
}

void td_reload_init(struct td_reload *r, const struct td_cmdline *cl, const char *start_dir,
		    struct td_config *running, pthread_mutex_t *lock, struct td_queue *q)
{
	r->cl = cl;
	r->start_dir = start_dir;
	r->running = running;
	r->lock = lock;
	r->q = q;
	td_config_init(&r->loaded);
	pthread_mutex_lock(lock);
	copy_live(&r->loaded, running);
	pthread_mutex_unlock(lock);
}

/* A comma-separated list of "[section] key" names, for one log line. */
struct key_list {
	char text[512];
	size_t len;
	unsigned int n;
};

static void list_add(struct key_list *l, const char *section, const char *key)
{
	int n;

	if (l->len >= sizeof(l->text))
		return;
	n = snprintf(l->text + l->len, sizeof(l->text) - l->len, "%s[%s] %s", l->n ? ", " : "",
		     section, key);
	l->len = n < 0 ? sizeof(l->text) : TD_MIN(l->len + (size_t)n, sizeof(l->text));
	l->n++;
}

/*
 * Make the file's relative paths absolute against the start directory, as
 * td_config_validate() did at start (td_config_resolve() then tidies them
 * and fills the default socket). Return: 0 or -ENOMEM.
 */
static int resolve_at(char **path, const char *dir)
{
	char *abs;

	if (!*path || (*path)[0] == '/')
		return 0;
	if (asprintf(&abs, "%s%s%s", dir, strcmp(dir, "/") == 0 ? "" : "/", *path) < 0)
		return -ENOMEM;
	free(*path);
	*path = abs;
	return 0;
}

static int build_next(struct td_reload *r, struct td_config *next, char *err, size_t errlen)
{
	int ret = td_config_build(next, r->cl, err, errlen);

	if (!ret)
		ret = td_config_check(next, err, errlen);
	if (!ret && (resolve_at(&next->image, r->start_dir) ||
		     resolve_at(&next->mountpoint, r->start_dir) ||
		     resolve_at(&next->socket, r->start_dir) ||
		     resolve_at(&next->rbd_conf, r->start_dir) ||
		     resolve_at(&next->rbd_keyring, r->start_dir))) {
		snprintf(err, errlen, "out of memory");
		ret = -ENOMEM;
	}
	if (!ret)
		ret = td_config_resolve(next, err, errlen);
	return ret;
}

/* What one reload found, for its log lines. */
struct reload_result {
	bool group_changed[LIVE_SHUTDOWN + 1]; /* a key of the group changed in the file */
	const struct td_config_key *changed[TD_CONFIG_NR_KEYS];
	size_t nr_changed;
	struct key_list restart; /* changed, needs a restart */
	struct key_list unused;	 /* changed, not used in this mode */
	unsigned int logged;	 /* lines the appliers logged */
};

static void apply_elevator(struct td_reload *r, const struct td_config *next,
			   struct reload_result *res)
{
	struct td_config *cur = r->running;
	int ret;

	if (cur->mode == TD_MODE_BIO) {
		list_add(&res->unused, "queue", "elevator");
		memcpy(r->loaded.elevator, next->elevator, sizeof(r->loaded.elevator));
		return;
	}
	if (strcmp(next->elevator, cur->elevator) != 0) {
		ret = td_queue_set_elevator(r->q, next->elevator);
		if (ret) {
			/* The last load's value stays: the next reload tries again. */
			res->logged++;
			td_err("reload: [queue] elevator = \"%s\": %s", next->elevator,
			       strerror(-ret));
			return;
		}
		res->logged++;
		td_notice("reload: elevator %s -> %s", cur->elevator, next->elevator);
		memcpy(cur->elevator, next->elevator, sizeof(cur->elevator));
	}
	memcpy(r->loaded.elevator, next->elevator, sizeof(r->loaded.elevator));
}

static void apply_depth(struct td_reload *r, const struct td_config *next,
			struct reload_result *res)
{
	struct td_config *cur = r->running;
	int ret;

	/* bio mode has neither elevator nor tags: nothing to resize. */
	if (cur->mode == TD_MODE_BIO) {
		list_add(&res->unused, "tags", "depth");
		r->loaded.depth = next->depth;
		return;
	}
	if (next->depth != cur->depth) {
		ret = td_queue_set_depth(r->q, next->depth);
		if (ret) {
			res->logged++;
			td_err("reload: [tags] depth = %u: %s", next->depth, strerror(-ret));
			return;
		}
		res->logged++;
		td_notice("reload: depth %u -> %u", cur->depth, next->depth);
		cur->depth = next->depth;
	}
	r->loaded.depth = next->depth;
}

/* The deadline tunables: only those whose value in the file changed. */
static void apply_tunables(struct td_reload *r, const struct td_config *next,
			   struct reload_result *res)
{
	struct td_config *cur = r->running;
	struct td_elv_tunables t = cur->tunables;

	for (size_t i = 0; i < res->nr_changed; i++) {
		const struct td_config_key *k = res->changed[i];

		if (live_group(k) != LIVE_TUNABLES)
			continue;
		if (key_is(k, "read_expire_ms"))
			t.read_expire_ms = r->loaded.tunables.read_expire_ms =
				next->tunables.read_expire_ms;
		else if (key_is(k, "write_expire_ms"))
			t.write_expire_ms = r->loaded.tunables.write_expire_ms =
				next->tunables.write_expire_ms;
		else if (key_is(k, "fifo_batch"))
			t.fifo_batch = r->loaded.tunables.fifo_batch = next->tunables.fifo_batch;
		else if (key_is(k, "writes_starved"))
			t.writes_starved = r->loaded.tunables.writes_starved =
				next->tunables.writes_starved;
	}
	if (memcmp(&t, &cur->tunables, sizeof(t)) == 0)
		return;
	td_queue_set_tunables(r->q, &t);
	cur->tunables = t;
	res->logged++;
	td_notice("reload: deadline tunables read_expire_ms %u, write_expire_ms %u, "
		  "fifo_batch %u, writes_starved %u",
		  t.read_expire_ms, t.write_expire_ms, t.fifo_batch, t.writes_starved);
}

static void apply_timeout(struct td_reload *r, const struct td_config *next,
			  struct reload_result *res)
{
	struct td_config *cur = r->running;
	uint32_t timeout_ms = cur->command_timeout_ms;
	uint32_t retries = cur->max_retries;
	int ret;

	for (size_t i = 0; i < res->nr_changed; i++) {
		const struct td_config_key *k = res->changed[i];

		if (live_group(k) != LIVE_TIMEOUT)
			continue;
		if (key_is(k, "command_timeout_ms"))
			timeout_ms = next->command_timeout_ms;
		else if (key_is(k, "max_retries"))
			retries = next->max_retries;
	}
	if (timeout_ms != cur->command_timeout_ms || retries != cur->max_retries) {
		ret = td_queue_set_timeout(r->q, timeout_ms, retries);
		if (ret) {
			res->logged++;
			td_err("reload: [drive] command_timeout_ms = %u, max_retries = %u: %s",
			       timeout_ms, retries, strerror(-ret));
			return;
		}
		cur->command_timeout_ms = timeout_ms;
		cur->max_retries = retries;
		res->logged++;
		td_notice("reload: command_timeout_ms %u, max_retries %u", timeout_ms, retries);
	}
	r->loaded.command_timeout_ms = timeout_ms;
	r->loaded.max_retries = retries;
}

static void apply_shutdown(struct td_reload *r, const struct td_config *next,
			   struct reload_result *res)
{
	struct td_config *cur = r->running;

	if (next->shutdown_timeout_ms != cur->shutdown_timeout_ms) {
		cur->shutdown_timeout_ms = next->shutdown_timeout_ms;
		res->logged++;
		td_notice("reload: shutdown_timeout_ms %u", next->shutdown_timeout_ms);
	}
	r->loaded.shutdown_timeout_ms = next->shutdown_timeout_ms;
}

/* Compare and apply. Config lock held. */
static void reload_locked(struct td_reload *r, const struct td_config *next)
{
	static void (*const apply[])(struct td_reload *, const struct td_config *,
				     struct reload_result *) = {
		[LIVE_ELEVATOR] = apply_elevator, [LIVE_DEPTH] = apply_depth,
		[LIVE_TUNABLES] = apply_tunables, [LIVE_TIMEOUT] = apply_timeout,
		[LIVE_SHUTDOWN] = apply_shutdown,
	};
	const struct td_config_key *running_diff[TD_CONFIG_NR_KEYS];
	struct reload_result res = { .nr_changed = 0 };
	size_t n;

	/* Live keys: changed in the file since the last load? */
	n = TD_MIN(td_config_diff(&r->loaded, next, res.changed, TD_CONFIG_NR_KEYS),
		   (size_t)TD_CONFIG_NR_KEYS);
	for (size_t i = 0; i < n; i++) {
		enum live_group g = live_group(res.changed[i]);

		if (g != LIVE_NONE) {
			res.group_changed[g] = true;
			res.changed[res.nr_changed++] = res.changed[i];
		}
	}
	/* Every other key: different from what runs? */
	n = TD_MIN(td_config_diff(r->running, next, running_diff, TD_CONFIG_NR_KEYS),
		   (size_t)TD_CONFIG_NR_KEYS);
	for (size_t i = 0; i < n; i++)
		if (live_group(running_diff[i]) == LIVE_NONE)
			list_add(&res.restart, running_diff[i]->section, running_diff[i]->key);

	for (size_t g = LIVE_NONE + 1; g < TD_ARRAY_SIZE(apply); g++)
		if (res.group_changed[g])
			apply[g](r, next, &res);

	if (res.unused.n)
		td_notice("reload: %s changed: not used in mode bio", res.unused.text);
	if (res.restart.n)
		td_warnx("reload: %s changed: restart to apply", res.restart.text);
	if (!res.logged && !res.unused.n && !res.restart.n)
		td_notice("reload: no change");
}

void td_reload_run(struct td_reload *r)
{
	struct td_config next;
	char err[1024];

	td_notify("RELOADING=1\nSTATUS=reloading the configuration");
	td_config_init(&next);
	if (build_next(r, &next, err, sizeof(err))) {
		td_err("reload: %s; keeping the current settings", err);
		td_config_free(&next);
		td_notify("READY=1\nSTATUS=serving (reload failed, see the log)");
		return;
	}
	pthread_mutex_lock(r->lock);
	reload_locked(r, &next);
	pthread_mutex_unlock(r->lock);
	td_config_free(&next);
	td_notify("READY=1\nSTATUS=serving (configuration reloaded)");
}
