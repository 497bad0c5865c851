// SPDX-License-Identifier: MIT
/*
 * The stats file with many owners: 150 processes of 50 users each hold a
 * region.  The file (many pages long) lists every process exactly once with
 * its own bytes and every user with the sum of its processes, reads the same
 * in 61-byte pieces as in one piece, agrees with STATS, and forgets the
 * processes once they exit.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "common.h"

#define NPROC	150
#define NUSER	50
#define UID0	2000

static char text[1 << 20], text2[1 << 20];

static size_t read_stats(char *buf, size_t size, size_t piece)
{
	int fd = open(PINMEM_STATS_PATH, O_RDONLY | O_CLOEXEC);
	size_t got = 0;
	ssize_t n;

	if (fd < 0)
		kt_bail("open %s: %s", PINMEM_STATS_PATH, strerror(errno));
	while (got + piece < size && (n = read(fd, buf + got, piece)) > 0)
		got += (size_t)n;
	close(fd);
	buf[got] = 0;
	return got;
}

/* Value of @key on the row starting "@kind @idkey @id ", -1 if no such row. */
static long long row_value(const char *buf, const char *kind, const char *idkey,
			   long long id, const char *key, int *rows)
{
	char head[64], pat[64];
	const char *p = buf, *q;
	long long v = -1;

	snprintf(head, sizeof(head), "%s %s %lld ", kind, idkey, id);
	snprintf(pat, sizeof(pat), " %s ", key);
	*rows = 0;
	while ((p = strstr(p, head))) {
		if (p == buf || p[-1] == '\n') {
			const char *eol = strchr(p, '\n');

			(*rows)++;
			q = strstr(p, pat);
			if (q && (!eol || q < eol))
				v = strtoll(q + strlen(pat), NULL, 10);
		}
		p += strlen(head);
	}
	return v;
}

static size_t pages_of(int i)
{
	return 1 + i % 4;
}

int main(void)
{
	static pid_t pids[NPROC];
	char *buf = kt_map(4 * KT_PAGE * NPROC, 1);
	long long user_bytes[NUSER] = { 0 }, total = 0;
	int ready[2], hold[2], i, bad_proc = 0, bad_user = 0, left = 0, rows;
	struct pinmem_stats st;
	size_t len;
	int fd;

	kt_limits_save();
	kt_limits_open();
	if (pipe(ready) || pipe(hold))
		kt_bail("pipe");
	fflush(stdout);
	for (i = 0; i < NPROC; i++) {
		pids[i] = fork();
		if (pids[i] < 0)
			kt_bail("fork: %s", strerror(errno));
		if (pids[i] == 0) {
			uint64_t h;
			char c;

			close(ready[0]);
			close(hold[1]);
			if (kt_become(UID0 + i % NUSER, KT_CAP(CAP_IPC_LOCK)))
				_exit(1);
			fd = kt_open();
			if (kt_pin_handle(fd, buf + (size_t)i * 4 * KT_PAGE, pages_of(i) * KT_PAGE, &h))
				_exit(2);
			if (write(ready[1], "x", 1) != 1)
				_exit(3);
			if (read(hold[0], &c, 1) < 0)	/* until the parent lets go */
				_exit(4);
			_exit(0);
		}
		user_bytes[i % NUSER] += (long long)(pages_of(i) * KT_PAGE);
		total += (long long)(pages_of(i) * KT_PAGE);
	}
	close(ready[1]);
	close(hold[0]);
	for (i = 0; i < NPROC; i++) {
		char c;

		if (read(ready[0], &c, 1) != 1)
			break;
	}
	kt_eq(i, NPROC, "%d processes of %d users each pinned a region", NPROC, NUSER);

	len = read_stats(text, sizeof(text), sizeof(text) - 1);
	kt_ok(len > 4 * KT_PAGE, "stats file is %zu bytes, several pages", len);
	read_stats(text2, sizeof(text2), 61);
	kt_ok(!strcmp(text, text2), "read in 61-byte pieces it is the same");
	for (i = 0; i < NPROC; i++) {
		long long v = row_value(text, "process", "pid", pids[i], "pinned_bytes", &rows);

		bad_proc += rows != 1 || v != (long long)(pages_of(i) * KT_PAGE);
	}
	kt_eq(bad_proc, 0, "every process listed once with its bytes");
	for (i = 0; i < NUSER; i++) {
		long long v = row_value(text, "user", "uid", UID0 + i, "pinned_bytes", &rows);

		bad_user += rows != 1 || v != user_bytes[i];
	}
	kt_eq(bad_user, 0, "every user listed once with the sum of its processes");
	fd = kt_open();
	kt_eq(kt_stats(fd, &st), 0, "STATS");
	kt_eq(st.global.pinned_bytes, total, "STATS global pinned_bytes is the sum");
	kt_eq(st.global.regions, NPROC, "STATS global regions");
	close(fd);

	close(hold[1]);
	for (i = 0; i < NPROC; i++)
		waitpid(pids[i], NULL, 0);
	close(ready[0]);
	read_stats(text, sizeof(text), sizeof(text) - 1);
	for (i = 0; i < NPROC; i++) {
		row_value(text, "process", "pid", pids[i], "pinned_bytes", &rows);
		left += rows;
	}
	kt_eq(left, 0, "exited processes are gone from the stats file");
	kt_limits_restore();
	kt_expect_clean("t_statsfile end");
	return kt_done();
}
