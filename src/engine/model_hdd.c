// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * model_hdd.c - the hdd latency model: one actuator, a head position, and
 * shortest positioning time first among the outstanding commands.
 *
 * The disk has capacity / sectors_per_track tracks; the head sits on the
 * track of the last command's end. A seek over d tracks takes
 * seek_track + (seek_full - seek_track) * sqrt(d / tracks) (0 for d = 0).
 * The platter turns at rpm; a sector's angle is its offset within its track,
 * and the rotational wait is the time for that angle to come under the head
 * after the seek. Service time = overhead + seek + rotation + transfer.
 * With several commands pending, the one with the smallest seek + rotation
 * goes first (a flush at once), which is what gives a queued disk its
 * advantage. One executor thread, whatever workers says: a disk has one arm.
 *
 * Tunables ([drive] in tagdisk.ini(5)): hdd_rpm (7200), hdd_seek_track_us
 * (500), hdd_seek_full_us (12000), hdd_transfer_mb_s (150, 10^6 bytes per
 * second), hdd_overhead_us (50), hdd_sectors_per_track (2048 sectors of 512
 * bytes). Bio mode executes without the model's delays.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include "drive_int.h"

/* The model's state; guarded by the drive lock. */
struct hdd {
	struct td_hdd_params p;
	uint64_t tracks;
	uint64_t rev_ns; /* one revolution */
	uint64_t head_sector;
	uint64_t seeks;
	uint64_t seek_distance; /* sectors */
};

static struct hdd *hdd_of(const struct td_drive *d)
{
	return d->model_state;
}

static int hdd_check(const struct td_drive_params *p)
{
	if (!p->hdd.rpm || !p->hdd.transfer_mb_s || !p->hdd.sectors_per_track ||
	    p->hdd.seek_full_us < p->hdd.seek_track_us)
		return -EINVAL;
	return 0;
}

static unsigned int hdd_nr_threads(const struct td_drive_params *p)
{
	(void)p;
	return 1;
}

static int hdd_init(struct td_drive *d, const struct td_drive_params *p)
{
	struct hdd *h = calloc(1, sizeof(*h));
	uint64_t sectors = p->capacity_bytes >> TD_SECTOR_SHIFT;

	if (!h)
		return -ENOMEM;
	h->p = p->hdd;
	h->tracks = TD_MAX(TD_DIV_ROUND_UP(sectors, h->p.sectors_per_track), 1);
	h->rev_ns = 60 * TD_NSEC_PER_SEC / h->p.rpm;
	d->model_state = h;
	return 0;
}

static void hdd_exit(struct td_drive *d)
{
	free(d->model_state);
	d->model_state = NULL;
}

/* Seek plus rotational wait to reach @sector when starting at @now with the head on @head. */
static uint64_t hdd_position_ns(const struct hdd *h, uint64_t head, uint64_t sector, uint64_t now)
{
	uint64_t spt = h->p.sectors_per_track;
	uint64_t from = head / spt;
	uint64_t to = sector / spt;
	uint64_t dist = from > to ? from - to : to - from;
	uint64_t seek = 0;

	if (dist) {
		double frac = sqrt((double)dist / (double)h->tracks);

		seek = (uint64_t)(h->p.seek_track_us +
				  (h->p.seek_full_us - h->p.seek_track_us) * frac) *
		       TD_NSEC_PER_USEC;
	}
	uint64_t arrive = now + seek;
	uint64_t angle_now = arrive % h->rev_ns;
	uint64_t angle_target = (sector % spt) * h->rev_ns / spt;
	uint64_t rot = (angle_target + h->rev_ns - angle_now) % h->rev_ns;

	return seek + rot;
}

/* Shortest positioning time first among everything the drive holds; the head moves. */
static struct td_request *hdd_next_locked(struct td_drive *d, uint64_t *service_ns)
{
	struct hdd *h = hdd_of(d);
	uint64_t now = td_now_ns();
	struct td_request *best = NULL;
	uint64_t best_ns = UINT64_MAX;
	struct td_list *pos;

	td_list_for_each(pos, &d->pending) {
		struct td_request *rq = td_list_entry(pos, struct td_request, drive_list);
		uint64_t t = rq->drive_cmd.op == TD_OP_FLUSH
				     ? 0
				     : hdd_position_ns(h, h->head_sector,
						       td_drive_cmd_sector(d, &rq->drive_cmd), now);

		if (t < best_ns) {
			best_ns = t;
			best = rq;
		}
	}

	const struct td_cdb_cmd *c = &best->drive_cmd;

	*service_ns = (uint64_t)h->p.overhead_us * TD_NSEC_PER_USEC;
	if (c->op != TD_OP_FLUSH) {
		uint64_t target = td_drive_cmd_sector(d, c);
		uint64_t moved = target > h->head_sector ? target - h->head_sector
							 : h->head_sector - target;

		*service_ns += best_ns + td_drive_transfer_ns(td_drive_cmd_bytes(d, c),
							      h->p.transfer_mb_s);
		if (moved / h->p.sectors_per_track) {
			h->seeks++;
			h->seek_distance += moved;
		}
		h->head_sector = target + (uint64_t)c->nr_blocks * (d->lbs >> TD_SECTOR_SHIFT);
	}
	return best;
}

static void hdd_status_locked(const struct td_drive *d, struct td_drive_status *st)
{
	const struct hdd *h = hdd_of(d);

	st->seeks = h->seeks;
	st->seek_distance = h->seek_distance;
	st->head_sector = h->head_sector;
}

const struct td_drive_model_ops td_model_hdd = {
	.name = "hdd",
	.thread_name = "td-actuator",
	.check = hdd_check,
	.nr_threads = hdd_nr_threads,
	.init = hdd_init,
	.exit = hdd_exit,
	.next_locked = hdd_next_locked,
	.status_locked = hdd_status_locked,
};
