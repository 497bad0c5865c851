// SPDX-License-Identifier: MIT
/*
 * `status --output FILE`: the output replaces FILE atomically.  It is
 * written to a hidden temporary file in FILE's directory (".NAME.XXXXXX",
 * which the node exporter's textfile collector skips: it reads *.prom),
 * flushed to disk, made 0644 and renamed over FILE, so a reader sees the
 * old file or the new one, never part of one; on any error the temporary
 * file is removed and FILE is left as it was.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pinctl.h"

int pctl_output_open(struct pctl_output *o, const char *path, char *why, size_t why_len)
{
	const char *slash = strrchr(path, '/');
	const char *base = slash ? slash + 1 : path;
	int dlen = slash ? (int)(slash - path + 1) : 0;
	int fd;

	memset(o, 0, sizeof(*o));
	if (!*base || !strcmp(base, ".") || !strcmp(base, "..")) {
		snprintf(why, why_len, "--output %s: not a file name", path);
		return -EINVAL;
	}
	if (strlen(path) >= sizeof(o->path) ||
	    snprintf(o->tmp, sizeof(o->tmp), "%.*s.%s.XXXXXX", dlen, path, base) >=
		    (int)sizeof(o->tmp)) {
		snprintf(why, why_len, "--output: path too long");
		return -ENAMETOOLONG;
	}
	strcpy(o->path, path);
	fd = mkstemp(o->tmp);
	if (fd < 0) {
		int err = errno;

		snprintf(why, why_len, "--output %s: cannot create a file in its directory: %s",
			 path, strerror(err));
		return -err;
	}
	o->f = fdopen(fd, "w");
	if (!o->f) {
		int err = errno;

		close(fd);
		unlink(o->tmp);
		snprintf(why, why_len, "--output %s: %s", path, strerror(err));
		return -err;
	}
	return 0;
}

void pctl_output_abort(struct pctl_output *o)
{
	if (!o->f)
		return;
	fclose(o->f);
	unlink(o->tmp);
	o->f = NULL;
}

int pctl_output_commit(struct pctl_output *o, char *why, size_t why_len)
{
	int err = 0;

	if (fflush(o->f) || ferror(o->f) || fchmod(fileno(o->f), 0644) || fsync(fileno(o->f)))
		err = errno ? errno : EIO;
	if (fclose(o->f) && !err)
		err = errno;
	o->f = NULL;
	if (!err && rename(o->tmp, o->path))
		err = errno;
	if (err) {
		unlink(o->tmp);
		snprintf(why, why_len, "--output %s: %s (the old file, if any, is left)",
			 o->path, strerror(err));
		return -err;
	}
	return 0;
}
