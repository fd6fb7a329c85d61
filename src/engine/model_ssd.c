// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * model_ssd.c - the ssd latency model: every command costs a fixed latency
 * plus its transfer time, and as many run at once as there are executor
 * threads (workers, at least one). Commands go in arrival order.
 *
 * Tunables ([drive] in tagdisk.ini(5)): ssd_latency_us (default 80, per
 * command) and ssd_transfer_mb_s (default 2000, 10^6 bytes per second).
 */
#include <errno.h>
#include <stdlib.h>
#include "drive_int.h"

static const struct td_ssd_params *ssd_params(const struct td_drive *d)
{
	return d->model_state;
}

static int ssd_check(const struct td_drive_params *p)
{
	return p->ssd.transfer_mb_s ? 0 : -EINVAL;
}

static unsigned int ssd_nr_threads(const struct td_drive_params *p)
{
	return TD_MAX(p->workers, 1U);
}

static int ssd_init(struct td_drive *d, const struct td_drive_params *p)
{
	struct td_ssd_params *s = malloc(sizeof(*s));

	if (!s)
		return -ENOMEM;
	*s = p->ssd;
	d->model_state = s;
	return 0;
}

static void ssd_exit(struct td_drive *d)
{
	free(d->model_state);
	d->model_state = NULL;
}

static uint64_t ssd_service_ns(const struct td_drive *d, const struct td_cdb_cmd *c)
{
	const struct td_ssd_params *s = ssd_params(d);

	return (uint64_t)s->latency_us * TD_NSEC_PER_USEC +
	       td_drive_transfer_ns(td_drive_cmd_bytes(d, c), s->transfer_mb_s);
}

static struct td_request *ssd_next_locked(struct td_drive *d, uint64_t *service_ns)
{
	struct td_request *rq = td_list_first_entry(&d->pending, struct td_request, drive_list);

	*service_ns = ssd_service_ns(d, &rq->drive_cmd);
	return rq;
}

const struct td_drive_model_ops td_model_ssd = {
	.name = "ssd",
	.thread_name = "td-ssd",
	.check = ssd_check,
	.nr_threads = ssd_nr_threads,
	.init = ssd_init,
	.exit = ssd_exit,
	.next_locked = ssd_next_locked,
	.sync_ns = ssd_service_ns,
};
