// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * replay_check.c - tagdisk-replay's checks (replay_int.h): running the --fsck
 * command on the target, when --check asks for it, and the crash states of a
 * flush epoch.
 *
 * A crash state saves what the target held under each write it applies (in
 * memory, in order) and puts it back in reverse order, which undoes
 * overlapping writes exactly.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "common/random.h"
#include "common/wlog_fmt.h"
#include "ctl/replay_int.h"

/* ---- checks ---------------------------------------------------------------------------- */

/*
 * Sync the target and run the check command on it, @i being the last entry
 * applied and @state what the target holds. Return: 0 when it passed, else
 * TD_REPLAY_CHECK_FAILED with *@why describing how it failed.
 */
int td_replay_run_check(struct td_replay *r, uint64_t i, const char *state, char *why,
			       size_t len)
{
	char entry[32], flushes[32];
	int status;
	pid_t pid;

	if (fsync(r->tfd) < 0) {
		td_replay_say(r, "%s: fsync: %s", r->o->target, strerror(errno));
		return TD_REPLAY_IO_ERROR;
	}
	r->checks++;
	snprintf(entry, sizeof(entry), "%" PRIu64, i);
	snprintf(flushes, sizeof(flushes), "%" PRIu64, r->flushes);
	fflush(r->out);
	fflush(r->err);
	pid = fork();
	if (pid < 0) {
		td_replay_say(r, "fork: %s", strerror(errno));
		return TD_REPLAY_IO_ERROR;
	}
	if (pid == 0) {
		setenv("TD_REPLAY_TARGET", r->o->target, 1);
		setenv("TD_REPLAY_ENTRY", entry, 1);
		setenv("TD_REPLAY_FLUSHES", flushes, 1);
		setenv("TD_REPLAY_MARK", r->mark ? r->mark : "", 1);
		setenv("TD_REPLAY_STATE", state, 1);
		execl("/bin/sh", "sh", "-c", r->o->fsck, (char *)NULL);
		_exit(127);
	}
	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR) {
			td_replay_say(r, "waitpid: %s", strerror(errno));
			return TD_REPLAY_IO_ERROR;
		}
	}
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	if (WIFEXITED(status))
		snprintf(why, len, "exited with status %d", WEXITSTATUS(status));
	else
		snprintf(why, len, "killed by signal %d", WTERMSIG(status));
	return TD_REPLAY_CHECK_FAILED;
}

/* Return: whether --check asks for a check after entry @x, the @count'th replayed. */
bool td_replay_check_due(const struct td_replay *r, const struct td_replay_ent *x,
				uint64_t count)
{
	switch (r->o->check) {
	case TD_REPLAY_CHECK_NONE:
		return false;
	case TD_REPLAY_CHECK_FLUSH:
		return x->e.flags & TD_WLOG_F_FLUSH;
	case TD_REPLAY_CHECK_FUA:
		return x->e.flags & TD_WLOG_F_FUA;
	case TD_REPLAY_CHECK_MARK:
		return x->e.flags & TD_WLOG_F_MARK;
	case TD_REPLAY_CHECK_EVERY:
		return count % r->o->check_every == 0;
	}
	return false;
}

/* ---- crash states ----------------------------------------------------------------------- */

struct undo {
	uint64_t off;
	uint64_t len;
	uint8_t *data;
};

static void undo_free(struct undo *u, size_t n)
{
	for (size_t k = 0; k < n; k++)
		free(u[k].data);
	free(u);
}

/* Put back what @u[0..@n) saved, last first. Return: 0 or TD_REPLAY_IO_ERROR. */
static int undo_apply(struct td_replay *r, const struct undo *u, size_t n)
{
	while (n--) {
		if (!td_replay_pwrite(r->tfd, u[n].data, u[n].len, u[n].off)) {
			td_replay_say(r, "%s: restoring after a crash state: %s", r->o->target,
				      strerror(errno));
			return TD_REPLAY_IO_ERROR;
		}
	}
	return 0;
}

/*
 * Apply the entries @d[k] with @keep[k] set, saving what they overwrite into
 * *@undo. Return: 0 or an error status.
 */
static int apply_kept(struct td_replay *r, const uint64_t *d, const bool *keep, size_t m,
		      struct undo **undo, size_t *nr_undo)
{
	struct undo *u = calloc(m ? m : 1, sizeof(*u));
	size_t nu = 0;
	int ret = 0;

	if (!u) {
		td_replay_say(r, "out of memory");
		return TD_REPLAY_IO_ERROR;
	}
	for (size_t k = 0; k < m && !ret; k++) {
		const struct td_replay_ent *x = &r->v[d[k]];

		if (!keep[k])
			continue;
		u[nu].off = x->e.sector * r->ss;
		u[nu].len = x->e.nr_sectors * r->ss;
		u[nu].data = malloc(u[nu].len);
		if (!u[nu].data) {
			td_replay_say(r, "out of memory for a crash state (%" PRIu64 " bytes)",
				      u[nu].len);
			ret = TD_REPLAY_IO_ERROR;
			break;
		}
		if (!td_replay_pread(r->tfd, u[nu].data, u[nu].len, u[nu].off)) {
			td_replay_say(r, "%s: reading: %s", r->o->target, strerror(errno));
			free(u[nu].data);
			ret = TD_REPLAY_IO_ERROR;
			break;
		}
		nu++;
		ret = td_replay_apply(r, d[k]);
	}
	*undo = u;
	*nr_undo = nu;
	return ret;
}

/* A short list of entry numbers: "12 14 15 ..." (the first few). */
static void kept_list(const uint64_t *d, const bool *keep, size_t m, char *buf, size_t len)
{
	size_t used = 0, shown = 0;

	buf[0] = '\0';
	for (size_t k = 0; k < m && used < len; k++) {
		if (!keep[k])
			continue;
		if (shown++ == 16) {
			snprintf(buf + used, len - used, " ...");
			return;
		}
		used += (size_t)snprintf(buf + used, len - used, "%s%" PRIu64, used ? " " : "", d[k]);
	}
}

static uint64_t mix(uint64_t h, uint64_t v)
{
	uint64_t s = h ^ (v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2));

	return td_splitmix64_next(&s);
}

/*
 * The crash states of the epoch [@es, @ee): the target holds the disk as it
 * was at its start. Return: 0 when every state passed (the target is as it
 * was), else the status (a failed state is left on the target).
 */
int td_replay_crash_epoch(struct td_replay *r, uint64_t es, uint64_t ee)
{
	unsigned int want = r->o->crash_states;
	uint64_t *d = malloc((ee - es + 1) * sizeof(*d));
	bool *keep = malloc((ee - es + 1) * sizeof(*keep));
	uint64_t *seen = calloc(want, sizeof(*seen));
	uint64_t rng = mix(r->o->seed, es);
	size_t m = 0, nseen = 0;
	int ret = 0;

	if (!d || !keep || !seen) {
		td_replay_say(r, "out of memory");
		ret = TD_REPLAY_IO_ERROR;
		goto out;
	}
	for (uint64_t i = es; i < ee; i++)
		if (td_replay_changes_data(r, &r->v[i]) && !(r->v[i].e.flags & TD_WLOG_F_FLUSH))
			d[m++] = i;
	if (m < 2)
		goto out; /* no state but the epoch's two ends, which are prefixes */
	for (unsigned int attempt = 0; nseen < want && attempt < 8 * want; attempt++) {
		size_t point = 1 + (size_t)(td_splitmix64_next(&rng) % m);
		uint64_t h = 0x5eed;
		size_t kept = 0;

		for (size_t k = 0; k < m; k++) {
			keep[k] = k < point && ((r->v[d[k]].e.flags & TD_WLOG_F_FUA) ||
						(td_splitmix64_next(&rng) & 1));
			if (keep[k]) {
				h = mix(h, d[k]);
				kept++;
			}
		}
		/* Nothing of the epoch, or all of it: the prefixes at its ends. */
		if (!kept || kept == m)
			continue;
		bool dup = false;

		for (size_t k = 0; k < nseen; k++)
			dup |= seen[k] == h;
		if (dup)
			continue;
		seen[nseen++] = h;

		struct undo *u = NULL;
		size_t nu = 0;
		char state[48], why[64], list[256];

		ret = apply_kept(r, d, keep, m, &u, &nu);
		if (!ret) {
			const char *prefix_mark = r->mark;

			/* The marks before the crash point were logged: what they vouch for holds. */
			for (uint64_t i = es; i <= d[point - 1]; i++)
				if (r->v[i].mark)
					r->mark = r->v[i].mark;
			snprintf(state, sizeof(state), "crash %zu/%u", nseen, want);
			r->crash_checked++;
			ret = td_replay_run_check(r, d[point - 1], state, why, sizeof(why));
			r->mark = prefix_mark;
			if (ret == TD_REPLAY_CHECK_FAILED) {
				kept_list(d, keep, m, list, sizeof(list));
				td_replay_say(r, "check failed at entry %" PRIu64
						 ", crash state %zu of the epoch of entries "
						 "%" PRIu64 "..%" PRIu64 " (kept %zu of its %zu "
						 "writes up to entry %" PRIu64 ": %s): \"%s\" %s",
					      d[point - 1], nseen, es, ee - 1, kept, m,
					      d[point - 1], list, r->o->fsck, why);
				undo_free(u, nu);
				goto out;
			}
		}
		if (!ret)
			ret = undo_apply(r, u, nu);
		undo_free(u, nu);
		if (ret)
			goto out;
	}
out:
	free(d);
	free(keep);
	free(seen);
	return ret;
}
