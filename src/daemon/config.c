// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * config.c - a config as a whole: set one key, build one from its three
 * layers (defaults < INI file < command line), free it, compare two.
 *
 * The layers live apart: the key table and defaults in config_keys.c, value
 * parsing in config_values.c, the file in config_file.c, the command line
 * in config_cmdline.c, the checks in config_check.c (see config_int.h).
 *
 * td_config_build() works on a fresh struct and replaces the caller's only
 * when every layer applied, so a reload that fails changes nothing. The
 * origin of each value (option, or line of the file) travels with it, for
 * the messages of the checks that run later.
 */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "config_int.h"

void td_config_free(struct td_config *c)
{
	free(c->image);
	free(c->mountpoint);
	free(c->socket);
	free(c->socket_group);
	free(c->rbd_pool);
	free(c->rbd_image);
	free(c->rbd_conf);
	free(c->rbd_id);
	free(c->rbd_keyring);
	free(c->nbd_uri);
	free(c->log_path);
	free(c->config_file);
	free(c->origin_file);
	td_cfg_strv_free(c->fuse_opts, c->nr_fuse_opts);
	memset(c, 0, sizeof(*c));
}

int td_config_set(struct td_config *c, const char *section, const char *key, const char *value,
		  char *err, size_t errlen)
{
	char qs[TD_CFG_QUOTE_MAX], qk[TD_CFG_QUOTE_MAX], subject[2 * TD_CFG_QUOTE_MAX + 4];
	const char *sec = td_cfg_find_section(section, strlen(section));
	char homes[128], known[128];
	enum td_cfg_key id;

	if (sec) {
		id = td_cfg_find_key(sec, key);
		if (id < NR_KEYS)
			return td_cfg_set_value(c, id, value, NULL, err, errlen);
	}
	snprintf(subject, sizeof(subject), "[%s] %s",
		 sec ? sec : td_cfg_escape(section, qs, sizeof(qs)),
		 td_cfg_escape(key, qk, sizeof(qk)));
	if (!sec)
		return td_cfg_bad_entry(NULL, subject, value, err, errlen, "unknown section %s",
					td_cfg_known_sections(known, sizeof(known)));
	if (td_cfg_key_homes(key, homes, sizeof(homes)))
		return td_cfg_bad_entry(NULL, subject, value, err, errlen,
					"unknown key in [%s] (it belongs in %s)", sec, homes);
	return td_cfg_bad_entry(NULL, subject, value, err, errlen, "unknown key");
}

int td_config_build(struct td_config *c, const struct td_cmdline *cl, char *err, size_t errlen)
{
	struct td_config n;
	int ret = 0;

	td_config_init(&n);
	if (cl->config_file) {
		n.config_file = strdup(cl->config_file);
		if (!n.config_file) {
			ret = td_cfg_nomem(err, errlen);
			goto out_free_new;
		}
		ret = td_config_load_file(&n, cl->config_file, err, errlen);
		if (ret)
			goto out_free_new;
	}
	for (size_t i = 0; i < cl->nr_overrides; i++) {
		const struct td_cmdline_override *o = &cl->overrides[i];
		const struct td_cfg_where w = {.option = o->option};
		enum td_cfg_key id = td_cfg_find_key(o->section, o->key);

		unsigned int file_line = n.origin[id].line;

		assert(id < NR_KEYS);
		ret = td_cfg_set_value(&n, id, o->value, &w, err, errlen);
		if (ret)
			goto out_free_new;
		n.origin[id].overridden_line = file_line;
	}
	n.foreground = cl->foreground;
	n.verbose = cl->verbose;
	for (size_t i = 0; i < cl->nr_fuse_opts; i++) {
		if (td_cfg_strv_push(&n.fuse_opts, &n.nr_fuse_opts, cl->fuse_opts[i],
				     strlen(cl->fuse_opts[i]))) {
			ret = td_cfg_nomem(err, errlen);
			goto out_free_new;
		}
	}
	td_config_free(c);
	*c = n;
	return 0;

out_free_new:
	td_config_free(&n);
	return ret;
}

size_t td_config_diff(const struct td_config *a, const struct td_config *b,
		      const struct td_config_key **changed, size_t max)
{
	size_t n = 0;

	for (unsigned int i = 0; i < NR_KEYS; i++) {
		if (td_cfg_value_equal(a, b, (enum td_cfg_key)i))
			continue;
		if (n < max)
			changed[n] = &td_config_keys[i];
		n++;
	}
	return n;
}
