// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * admin.c - the admin socket: accepting, credentials, lines in, JSON out.
 *
 * One thread, one poll(2) loop over: a wake-up pipe (for shutdown), the
 * listening socket, and every connection. A connection has an input buffer
 * that collects one line (at most TD_ADMIN_LINE_MAX bytes; a longer line is
 * answered with an error and skipped up to its newline) and an output buffer
 * of reply lines waiting for the socket to accept them. When a connection's
 * output grows past OUT_HIGH the loop stops reading from it until the client
 * catches up, so a client that never reads costs bounded memory.
 *
 * A trace connection is a subscriber with one ring per emitting thread
 * (tagdisk/trace.h), of the size `trace` asked for. While any exist, poll
 * wakes every TRACE_PERIOD_MS to move events from the rings into output
 * buffers, but only while a buffer is below OUT_HIGH: a slow reader leaves
 * events in the rings, which drop what does not fit and count it. Events
 * are read merged by time up to TRACE_HOLDBACK_NS ago: an event stamped
 * earlier may still be on its way into its ring. In the JSON stream each
 * event becomes one line through one json-c object per thread whose
 * members are set in place, so a busy stream allocates nothing per event
 * (struct event_line). In the blktrace stream (`trace blktrace`) each event
 * becomes one 48-byte blk_io_trace record (common/blktrace_fmt.h), with a
 * process note before a pid's first event and a message record plus a
 * sequence gap where events were dropped (common/blktrace_writer.h), so the
 * client only copies bytes to its file. An event can still come after the
 * holdback (its thread was descheduled between stamping and publishing it):
 * the blktrace writer holds records TRACE_REORDER_NS longer and writes them in
 * time order with their own times, which blkparse and btt need; one later
 * than that is dropped and said.
 *
 * About once a second the loop records the stats totals, for the rates in
 * `status`.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include "common/blktrace_writer.h"
#include "common/clock.h"
#include "common/jsonc.h"
#include "common/lock.h"
#include "common/log.h"
#include "daemon/admin_int.h"
#include "tagdisk/trace.h"

#define MAX_CONNS	1024
#define OUT_HIGH	(256U << 10)	/* stop reading / stop feeding trace events above this */
#define TRACE_PERIOD_MS 10
#define TRACE_HOLDBACK_NS (2 * TD_NSEC_PER_MSEC)
#define TRACE_REORDER_NS (100 * TD_NSEC_PER_MSEC) /* blktrace: the writer's reorder window */
#define TRACE_SNDBUF	(8 << 20)	/* socket buffer of a blktrace stream */
#define SAMPLE_PERIOD_NS TD_NSEC_PER_SEC

struct conn {
	int fd;
	uid_t uid;
	pid_t pid;
	char in[TD_ADMIN_LINE_MAX + 2];
	size_t in_len;
	bool skipping; /* discarding the rest of an over-long line */
	char *out;
	size_t out_len;
	size_t out_cap;
	size_t out_off; /* bytes of out already written */
	bool closing;	/* close once out is written */
	struct td_trace_sub *sub;
	uint64_t trace_dropped;
	struct td_blktrace *bt; /* a blktrace stream; NULL for JSON lines */
	/*
	 * A blktrace stream whose client shut its sending half down: it wants
	 * every event up to then, the ones the reorder window holds included,
	 * before the daemon closes the stream.
	 */
	bool draining;
	uint64_t drain_until;
};

/* ---- output ---------------------------------------------------------------------------- */

static bool out_append(struct conn *c, const char *data, size_t len)
{
	if (c->out_off && c->out_off == c->out_len) {
		c->out_off = 0;
		c->out_len = 0;
	}
	if (c->out_len + len > c->out_cap) {
		size_t cap = TD_MAX(c->out_cap * 2, c->out_len + len + 4096);
		char *p = realloc(c->out, cap);

		if (!p)
			return false;
		c->out = p;
		c->out_cap = cap;
	}
	memcpy(c->out + c->out_len, data, len);
	c->out_len += len;
	return true;
}

/* Queue @text (@len bytes, no newline) and a newline; a connection we cannot answer closes. */
static void out_text(struct conn *c, const char *text, size_t len)
{
	if (!out_append(c, text, len) || !out_append(c, "\n", 1))
		c->closing = true;
}

static void out_line(struct conn *c, struct td_admin_reply *r)
{
	size_t len;
	const char *text = td_admin_reply_line(r, &len);

	out_text(c, text, len);
}

/* Write what the socket takes. Return: false when the connection is dead. */
static bool flush_out(struct conn *c)
{
	while (c->out_off < c->out_len) {
		ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off,
				 MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return errno == EAGAIN || errno == EWOULDBLOCK;
		}
		c->out_off += (size_t)n;
	}
	c->out_off = c->out_len = 0;
	return true;
}

static size_t out_pending(const struct conn *c)
{
	return c->out_len - c->out_off;
}

/* ---- credentials ----------------------------------------------------------------------- */

/*
 * Return: true when the peer on @fd, with credentials @cred, may use a socket of group
 * @sock_gid: root, the daemon's user, or a process whose group or supplementary groups
 * include it. The groups are the peer's own (SO_PEERGROUPS, taken at connect time), the
 * ones the kernel judged the socket file's permissions by, not the user database's.
 */
static bool peer_allowed(int fd, const struct ucred *cred, gid_t sock_gid)
{
	gid_t small[64];
	gid_t *groups = small;
	socklen_t len = sizeof(small);
	bool found = false;

	if (cred->uid == 0 || cred->uid == geteuid())
		return true;
	if (sock_gid == (gid_t)-1)
		sock_gid = getegid();
	if (cred->gid == sock_gid)
		return true;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &len) < 0) {
		/* ERANGE: more groups than fit; len now says how many bytes they need. */
		if (errno != ERANGE || !(groups = malloc(len)))
			return false;
		if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &len) < 0)
			goto out_free;
	}
	for (size_t i = 0; i < len / sizeof(*groups); i++)
		found |= groups[i] == sock_gid;
out_free:
	if (groups != small)
		free(groups);
	return found;
}

/* ---- connections ----------------------------------------------------------------------- */

static void conn_close(struct td_admin *a, struct conn *c)
{
	if (c->sub)
		td_trace_unsubscribe(a->p.trace, c->sub);
	td_blktrace_free(c->bt);
	close(c->fd);
	free(c->out);
	free(c);
}

static struct conn *conn_accept(struct td_admin *a, int nconns)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);
	int fd = accept4(a->sock.fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	struct conn *c;

	if (fd < 0)
		return NULL;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
		close(fd);
		return NULL;
	}
	if (!peer_allowed(fd, &cred, a->p.socket_gid)) {
		static const char msg[] = "{\"ok\":false,\"error\":\"permission denied: not root, "
					  "the daemon's user, or a member of the socket's "
					  "group\"}\n";

		td_warnx("admin: refused uid %u (pid %d): not root, the daemon's user or in the "
			 "socket's group",
			 (unsigned int)cred.uid, (int)cred.pid);
		ssize_t n = send(fd, msg, sizeof(msg) - 1, MSG_NOSIGNAL | MSG_DONTWAIT);

		(void)n;
		close(fd);
		return NULL;
	}
	if (nconns >= MAX_CONNS) {
		static const char msg[] = "{\"ok\":false,\"error\":\"too many admin connections\"}\n";
		ssize_t n = send(fd, msg, sizeof(msg) - 1, MSG_NOSIGNAL | MSG_DONTWAIT);

		(void)n;
		td_warnx("admin: refused a connection: %d already open", MAX_CONNS);
		close(fd);
		return NULL;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		close(fd);
		return NULL;
	}
	c->fd = fd;
	c->uid = cred.uid;
	c->pid = cred.pid;
	td_debug("admin: connection from pid %d (uid %u)", (int)cred.pid, (unsigned int)cred.uid);
	return c;
}

/* The blktrace writer's bytes go to @arg's output buffer. */
static int bt_emit(void *arg, const void *buf, size_t len)
{
	struct conn *c = arg;

	if (!out_append(c, buf, len)) {
		c->closing = true;
		return -ENOMEM;
	}
	return 0;
}

/* Make @c the stream `trace` asked for (a->trace_req), or say in @reply why not. */
static void trace_start(struct td_admin *a, struct conn *c, struct td_admin_reply *reply)
{
	/* The reorder window of a blktrace stream is its memory too: the budget counts it. */
	size_t window = 0;

	if (a->trace_req.blktrace) {
		int size = TRACE_SNDBUF;
		const struct td_blktrace_writer_params bp = {
			.emit = bt_emit,
			.emit_arg = c,
			.device = TD_BLKTRACE_DEVICE,
			.comm = td_blktrace_proc_comm,
			.reorder_ns = TRACE_REORDER_NS,
		};

		window = td_blktrace_window_bytes(&bp);
		c->bt = td_blktrace_create(&bp);
		if (!c->bt) {
			td_admin_error(reply, "trace: out of memory");
			return;
		}
		/* Bursts of records wait in the socket rather than in the rings; root may force it. */
		if (setsockopt(c->fd, SOL_SOCKET, SO_SNDBUFFORCE, &size, sizeof(size)) < 0)
			setsockopt(c->fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof(size));
	}
	c->sub = td_trace_subscribe(a->p.trace, &(struct td_trace_sub_params){
						    .ring_events = a->trace_req.ring_events,
						    .min_ring_events = a->trace_req.min_ring_events,
						    .nr_rings = a->p.trace_threads,
						    .extra_bytes = window,
					    });
	if (c->sub) {
		if (a->trace_req.details) {
			/* What the stream got: the rings may be smaller than asked (defaults). */
			td_admin_put_u64(reply, reply->root, "events_per_thread",
					 td_trace_sub_ring_events(c->sub));
			td_admin_put_u64(reply, reply->root, "threads", a->p.trace_threads);
			td_admin_put_u64(reply, reply->root, "bytes", td_trace_sub_bytes(c->sub));
		}
		return;
	}
	if (errno == ENOSPC) {
		size_t used;
		size_t budget = td_trace_budget(a->p.trace, &used);
		size_t events = a->trace_req.min_ring_events ? a->trace_req.min_ring_events
							      : a->trace_req.ring_events;

		char what[64] = "";

		if (window)
			snprintf(what, sizeof(what), " and a %zu KiB reorder window", window >> 10);
		td_admin_error(reply,
			       "trace: over the trace memory budget: this stream needs %zu KiB"
			       " (a buffer for each of %u threads%s), %zu KiB of trace_budget"
			       " %zu KiB is left",
			       (td_trace_sub_cost(events, a->p.trace_threads) + window) >> 10,
			       a->p.trace_threads, what, (budget - used) >> 10, budget >> 10);
	} else {
		td_admin_error(reply, "trace: %s",
			       errno == EBUSY ? "too many trace streams" : "out of memory");
	}
	td_blktrace_free(c->bt);
	c->bt = NULL;
}

static void handle_line(struct td_admin *a, struct conn *c, struct td_admin_reply *reply,
			const char *line, size_t len)
{
	struct td_admin_request *req = malloc(sizeof(*req));
	char err[256];

	if (!req) {
		c->closing = true;
		return;
	}
	if (td_admin_parse(line, len, req, err, sizeof(err))) {
		td_admin_error(reply, "%s", err);
		out_line(c, reply);
		free(req);
		return;
	}
	td_debug("admin: pid %d: %s", (int)c->pid, req->cmd->name);
	if (td_admin_execute(a, req, reply) == TD_ADMIN_TRACE)
		trace_start(a, c, reply);
	out_line(c, reply);
	free(req);
}

/* Read and answer what @c sent. Return: false when the connection is finished. */
static bool conn_read(struct td_admin *a, struct conn *c, struct td_admin_reply *reply)
{
	for (;;) {
		size_t room = sizeof(c->in) - c->in_len;
		ssize_t n = recv(c->fd, c->in + c->in_len, room, MSG_DONTWAIT);

		if (n < 0)
			return errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK;
		if (n == 0) {
			/* The client is done sending: answer what it sent, then close. */
			if (c->bt && !c->draining) {
				/* A blktrace stream: first the events up to now (trace_feed()). */
				c->draining = true;
				c->drain_until = td_now_ns();
				return true;
			}
			if (c->sub)
				return c->draining;
			c->closing = true;
			return true;
		}
		if (c->sub)
			continue; /* a trace stream takes no more commands */
		c->in_len += (size_t)n;

		char *nl;

		while ((nl = memchr(c->in, '\n', c->in_len))) {
			size_t line_len = (size_t)(nl - c->in);

			if (c->skipping)
				c->skipping = false;
			else
				handle_line(a, c, reply, c->in, line_len);
			c->in_len -= line_len + 1;
			memmove(c->in, nl + 1, c->in_len);
			if (c->sub)
				return true;
		}
		if (c->in_len > TD_ADMIN_LINE_MAX) {
			/* No newline within the limit: answer once, drop the rest of the line. */
			if (!c->skipping) {
				td_admin_error(reply, "line too long (over %d bytes)",
					       TD_ADMIN_LINE_MAX);
				out_line(c, reply);
			}
			c->skipping = true;
			c->in_len = 0;
		}
		if (out_pending(c) > OUT_HIGH)
			return true; /* let the client read before we answer more */
	}
}

/*
 * The trace stream's lines (docs/protocol.md, "trace"): one object whose
 * members keep their order and are set in place for each event. Members
 * point into obj; obj is NULL when it could not be built.
 */
struct event_line {
	struct json_object *obj;
	struct json_object *time_ns, *pid, *action, *op, *fua, *sector, *sectors, *tag, *error;
	struct json_object *dropped_obj; /* {"dropped":N} */
	struct json_object *dropped;
};

static struct json_object *event_member(struct json_object *obj, const char *key,
					struct json_object *val)
{
	return td_jsonc_add(obj, key, val) ? val : NULL;
}

static void event_line_free(struct event_line *e)
{
	json_object_put(e->obj);
	json_object_put(e->dropped_obj);
	*e = (struct event_line){ 0 };
}

/* Return: true when @e holds both objects (else it holds nothing). */
static bool event_line_init(struct event_line *e)
{
	struct json_object *o = json_object_new_object();

	*e = (struct event_line){ .obj = o, .dropped_obj = json_object_new_object() };
	e->time_ns = event_member(o, "time_ns", json_object_new_uint64(0));
	e->pid = event_member(o, "pid", json_object_new_int64(0));
	e->action = event_member(o, "action", json_object_new_string("Q"));
	e->op = event_member(o, "op", json_object_new_string("read"));
	e->fua = event_member(o, "fua", json_object_new_boolean(false));
	e->sector = event_member(o, "sector", json_object_new_uint64(0));
	e->sectors = event_member(o, "sectors", json_object_new_uint64(0));
	e->tag = event_member(o, "tag", json_object_new_int64(0));
	e->error = event_member(o, "error", json_object_new_int64(0));
	e->dropped = event_member(e->dropped_obj, "dropped", json_object_new_uint64(0));
	if (e->time_ns && e->pid && e->action && e->op && e->fua && e->sector && e->sectors &&
	    e->tag && e->error && e->dropped)
		return true;
	event_line_free(e);
	return false;
}

/* Queue the line of @ev; json-c writes it into the object's own buffer, kept between events. */
static void event_line_out(struct conn *c, struct event_line *e, const struct td_trace_event *ev)
{
	char action[2] = { (char)ev->action, '\0' };
	const char *text;
	size_t len;

	json_object_set_uint64(e->time_ns, ev->time_ns);
	json_object_set_int64(e->pid, ev->pid);
	json_object_set_uint64(e->sector, ev->sector);
	json_object_set_uint64(e->sectors, ev->nr_sectors);
	json_object_set_int64(e->tag, ev->tag);
	json_object_set_int64(e->error, ev->error);
	json_object_set_boolean(e->fua, ev->fua);
	/* Strings that cannot be set (no memory) would leave the last event's: end the stream. */
	if (json_object_set_string(e->action, action) < 0 ||
	    json_object_set_string(e->op, td_op_name((enum td_op)ev->op)) < 0 ||
	    !(text = td_jsonc_line(e->obj, &len))) {
		c->closing = true;
		return;
	}
	out_text(c, text, len);
}

/* ---- the blktrace stream ---------------------------------------------------------------- */

static void bt_event(struct conn *c, const struct td_trace_event *ev)
{
	const struct td_blktrace_event bev = {
		.time_ns = ev->time_ns,
		.pid = ev->pid,
		.action = (char)ev->action,
		.op = td_op_name((enum td_op)ev->op),
		.fua = ev->fua,
		.sector = ev->sector,
		.sectors = ev->nr_sectors,
		.error = ev->error,
	};

	/* -EINVAL: an event blktrace has no word for; anything else: no memory. */
	if (td_blktrace_add(c->bt, &bev) == -ENOMEM)
		c->closing = true;
}

/*
 * Move events into @c's output as records, pushing them to the socket as
 * they pile up, until the rings are empty (up to @until_ns) or the socket is
 * full. Return: true when every event up to @until_ns was taken.
 */
static bool trace_feed_blktrace(struct td_admin *a, struct conn *c, uint64_t until_ns)
{
	struct td_trace_event ev[512];

	for (;;) {
		size_t n = TD_ARRAY_SIZE(ev);

		while (out_pending(c) < OUT_HIGH && !c->closing && n == TD_ARRAY_SIZE(ev)) {
			uint64_t dropped = 0;

			n = td_trace_read_until(a->p.trace, c->sub, ev, TD_ARRAY_SIZE(ev), until_ns,
						&dropped);
			if (dropped && td_blktrace_dropped(c->bt, dropped))
				c->closing = true;
			for (size_t i = 0; i < n; i++)
				bt_event(c, &ev[i]);
		}
		/* An idle stream too writes what has waited out the window. */
		if (!c->closing && n < TD_ARRAY_SIZE(ev) && until_ns > TRACE_REORDER_NS &&
		    td_blktrace_flush(c->bt, until_ns - TRACE_REORDER_NS))
			c->closing = true;
		if (c->closing || n < TD_ARRAY_SIZE(ev) || !flush_out(c) || out_pending(c))
			return !c->closing && n < TD_ARRAY_SIZE(ev);
	}
}

/* ---- feeding a stream -------------------------------------------------------------------- */

static void trace_feed(struct td_admin *a, struct conn *c, struct event_line *e)
{
	struct td_trace_event ev[256];
	uint64_t dropped = 0;
	uint64_t now = td_now_ns();
	uint64_t until = now > TRACE_HOLDBACK_NS ? now - TRACE_HOLDBACK_NS : 0;

	if (c->bt) {
		if (c->draining)
			until = TD_MIN(until, c->drain_until);
		/*
		 * Draining: once every event stamped before the client stopped is in
		 * (they are published within the holdback), write what the reorder
		 * window holds and close.
		 */
		if (trace_feed_blktrace(a, c, until) && c->draining &&
		    now >= c->drain_until + TRACE_HOLDBACK_NS) {
			td_blktrace_flush(c->bt, UINT64_MAX);
			c->closing = true;
		}
		return;
	}

	/* Made on the first trace, kept until the thread ends. */
	if (!e->obj && !event_line_init(e)) {
		td_warnx("admin: trace: out of memory; closing the stream of pid %d", (int)c->pid);
		c->closing = true;
		return;
	}
	while (out_pending(c) < OUT_HIGH && !c->closing) {
		size_t n = td_trace_read_until(a->p.trace, c->sub, ev, TD_ARRAY_SIZE(ev), until,
					       &dropped);
		const char *text;
		size_t len;

		c->trace_dropped += dropped;
		if (c->trace_dropped) {
			json_object_set_uint64(e->dropped, c->trace_dropped);
			text = td_jsonc_line(e->dropped_obj, &len);
			if (!text) {
				c->closing = true;
				return;
			}
			out_text(c, text, len);
			c->trace_dropped = 0;
		}
		for (size_t i = 0; i < n; i++)
			event_line_out(c, e, &ev[i]);
		if (n < TD_ARRAY_SIZE(ev))
			break;
	}
}

/* ---- the loop -------------------------------------------------------------------------- */

static void *admin_main(void *arg)
{
	struct td_admin *a = arg;
	struct conn **conns = calloc(MAX_CONNS, sizeof(*conns));
	struct pollfd *pfd = calloc(MAX_CONNS + 2, sizeof(*pfd));
	struct td_admin_reply reply = { 0 };
	struct event_line ev_line = { 0 };
	int nconns = 0;
	uint64_t next_sample = td_now_ns();

	td_thread_name("td-admin");
	if (!conns || !pfd) {
		td_err("admin: out of memory; the admin socket is not served");
		goto out;
	}
	for (;;) {
		int ntrace = 0;

		pfd[0] = (struct pollfd){ .fd = a->wake_pipe[0], .events = POLLIN };
		pfd[1] = (struct pollfd){ .fd = a->sock.fd, .events = POLLIN };
		for (int i = 0; i < nconns; i++) {
			struct conn *c = conns[i];
			short ev = 0;

			/* A draining stream has nothing more to read: its EOF came. */
			if (!c->closing && !c->draining && out_pending(c) <= OUT_HIGH)
				ev |= POLLIN;
			if (out_pending(c))
				ev |= POLLOUT;
			pfd[i + 2] = (struct pollfd){ .fd = c->fd, .events = ev };
			ntrace += c->sub != NULL;
		}
		uint64_t now = td_now_ns();
		int timeout = (int)((next_sample > now ? next_sample - now : 0) / TD_NSEC_PER_MSEC);

		if (ntrace)
			timeout = TD_MIN(timeout, TRACE_PERIOD_MS);
		if (poll(pfd, (nfds_t)nconns + 2, timeout) < 0 && errno != EINTR) {
			td_err_errno("admin: poll");
			break;
		}
		if (pfd[0].revents)
			break;
		if (td_now_ns() >= next_sample) {
			td_admin_sample(a);
			next_sample = td_now_ns() + SAMPLE_PERIOD_NS;
		}
		for (int i = 0; i < nconns; i++) {
			struct conn *c = conns[i];
			bool alive = true;

			if (pfd[i + 2].revents & (POLLIN | POLLHUP | POLLERR))
				alive = conn_read(a, c, &reply);
			if (alive && c->sub)
				trace_feed(a, c, &ev_line);
			if (alive)
				alive = flush_out(c) && !(c->closing && !out_pending(c));
			if (!alive) {
				conn_close(a, c);
				conns[i] = conns[--nconns];
				pfd[i + 2] = pfd[nconns + 2];
				i--;
			}
		}
		if (pfd[1].revents & POLLIN) {
			struct conn *c;

			/* Take everyone who is waiting, not just one per wake-up. */
			while ((c = conn_accept(a, nconns)))
				conns[nconns++] = c;
		}
	}
	while (nconns)
		conn_close(a, conns[--nconns]);
out:
	event_line_free(&ev_line);
	td_admin_reply_free(&reply);
	free(pfd);
	free(conns);
	return NULL;
}

/*
 * The default directory for root, /run/tagdisk, may be missing (systemd's
 * RuntimeDirectory makes it for the unit): make it, say so, and remove it
 * again on exit. The config checked that only this one level is missing.
 */
static int make_socket_dir(struct td_admin *a, char *err, size_t errlen)
{
	char *dir = strdup(a->socket_path);
	char *slash = dir ? strrchr(dir, '/') : NULL;
	int ret = 0;

	if (!dir) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	if (slash && slash != dir) {
		*slash = '\0';
		if (mkdir(dir, 0755) == 0) {
			a->made_dir = dir;
			dir = NULL;
			td_notice("admin: created the socket directory \"%s\" (removed again on exit)",
				  a->made_dir);
		} else if (errno != EEXIST) {
			ret = -errno;
			snprintf(err, errlen, "admin socket directory \"%s\": %s", dir,
				 strerror(errno));
		}
	}
	free(dir);
	return ret;
}

/* The directory made for the socket, if it is empty now (another daemon's socket may be there). */
static void remove_made_dir(struct td_admin *a)
{
	if (!a->made_dir)
		return;
	if (rmdir(a->made_dir) == 0)
		td_info("admin: removed the socket directory \"%s\"", a->made_dir);
	free(a->made_dir);
	a->made_dir = NULL;
}

void td_admin_remove_socket(struct td_admin *a)
{
	td_admin_socket_remove(&a->sock, a->socket_path);
	remove_made_dir(a);
}

/* ---- API -------------------------------------------------------------------------------- */

int td_admin_create(struct td_admin **out, const struct td_admin_params *p, char *err,
		    size_t errlen)
{
	struct td_admin *a = calloc(1, sizeof(*a));
	int ret = -ENOMEM;

	err[0] = '\0';
	if (!a) {
		snprintf(err, errlen, "out of memory");
		return ret;
	}
	a->p = *p;
	a->sock.fd = -1;
	a->wake_pipe[0] = a->wake_pipe[1] = -1;
	a->start_ns = td_now_ns();
	pthread_mutex_init(&a->fe_lock, NULL);
	a->socket_path = strdup(p->socket_path);
	a->image = strdup(p->image);
	if (!a->socket_path || !a->image) {
		snprintf(err, errlen, "out of memory");
		goto out_free;
	}
	if (pipe2(a->wake_pipe, O_CLOEXEC) < 0) {
		ret = -errno;
		snprintf(err, errlen, "admin: pipe: %s", strerror(errno));
		goto out_free;
	}
	ret = make_socket_dir(a, err, errlen);
	if (ret)
		goto out_close_pipe;
	ret = td_admin_socket_open(&a->sock, a->socket_path, p->socket_mode, p->socket_gid, err,
				   errlen);
	if (ret) {
		remove_made_dir(a);
		goto out_close_pipe;
	}
	td_admin_sample(a);
	ret = -pthread_create(&a->thread, NULL, admin_main, a);
	if (ret) {
		snprintf(err, errlen, "admin: cannot start its thread: %s", strerror(-ret));
		goto out_close_socket;
	}
	*out = a;
	return 0;

out_close_socket:
	close(a->sock.fd);
	td_admin_remove_socket(a);
out_close_pipe:
	close(a->wake_pipe[0]);
	close(a->wake_pipe[1]);
out_free:
	pthread_mutex_destroy(&a->fe_lock);
	free(a->socket_path);
	free(a->image);
	free(a);
	return ret;
}

void td_admin_set_frontend(struct td_admin *a, struct td_frontend *fe, const char *mountpoint,
			   const char *name)
{
	char *path = NULL;

	if (asprintf(&path, "%s/%s", mountpoint, name) < 0)
		path = NULL;
	pthread_mutex_lock(&a->fe_lock);
	a->fe = fe;
	free(a->disk_path);
	a->disk_path = path;
	pthread_mutex_unlock(&a->fe_lock);
}

void td_admin_set_takeover(struct td_admin *a, bool recovery, bool fd_store, uint64_t takeovers,
			   uint64_t resent)
{
	pthread_mutex_lock(&a->fe_lock);
	a->recovery = recovery;
	a->fd_store = fd_store;
	a->takeovers = takeovers;
	a->resent = resent;
	pthread_mutex_unlock(&a->fe_lock);
}

void td_admin_destroy(struct td_admin *a)
{
	ssize_t n = write(a->wake_pipe[1], "x", 1);

	(void)n;
	pthread_join(a->thread, NULL);
	close(a->sock.fd);
	td_admin_remove_socket(a);
	close(a->wake_pipe[0]);
	close(a->wake_pipe[1]);
	pthread_mutex_destroy(&a->fe_lock);
	free(a->disk_path);
	free(a->socket_path);
	free(a->image);
	free(a);
}
