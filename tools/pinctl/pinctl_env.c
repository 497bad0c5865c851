// SPDX-License-Identifier: MIT
/*
 * Where pinctl reads from.  Every /proc, /sys and /dev path is taken relative
 * to a root that an environment variable can move, so the golden tests run
 * pinctl on recorded trees; the user database can be a file for the same
 * reason.
 */
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pinctl.h"

static void env_str(char *dst, size_t len, const char *var, const char *def)
{
	const char *v = getenv(var);

	snprintf(dst, len, "%s", v && *v ? v : def);
}

void pctl_env_init(struct pctl_env *env)
{
	memset(env, 0, sizeof(*env));
	env_str(env->proc_root, sizeof(env->proc_root), "PINCTL_PROC_ROOT", "/proc");
	env_str(env->sys_root, sizeof(env->sys_root), "PINCTL_SYS_ROOT", "/sys");
	env_str(env->dev_root, sizeof(env->dev_root), "PINCTL_DEV_ROOT", "/dev");
	env_str(env->passwd, sizeof(env->passwd), "PINCTL_PASSWD", "");
	env_str(env->cuda_lib, sizeof(env->cuda_lib), "PINCTL_CUDA_LIB", "libcuda.so.1");
	env->out = stdout;
	env->err = stderr;
}

void pctl_err(const struct pctl_env *env, const char *fmt, ...)
{
	va_list ap;

	fflush(env->out);
	fputs("pinctl: ", env->err);
	va_start(ap, fmt);
	vfprintf(env->err, fmt, ap);
	va_end(ap);
	fputc('\n', env->err);
}

int pctl_path(char *buf, size_t len, const char *root, const char *rel)
{
	int n = snprintf(buf, len, "%s/%s", root, rel);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

int pctl_read_file(const char *path, char **data, size_t *len)
{
	size_t cap = 4096, n = 0;
	char *buf, *nb;
	ssize_t r;
	int fd, err;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	buf = malloc(cap);
	if (!buf) {
		close(fd);
		return -ENOMEM;
	}
	/* /proc files report size 0: read until EOF */
	for (;;) {
		if (cap - n < 2) {
			nb = realloc(buf, cap * 2);
			if (!nb) {
				err = -ENOMEM;
				goto fail;
			}
			buf = nb;
			cap *= 2;
		}
		r = read(fd, buf + n, cap - n - 1);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			err = -errno;
			goto fail;
		}
		if (!r)
			break;
		n += (size_t)r;
	}
	close(fd);
	buf[n] = '\0';
	*data = buf;
	if (len)
		*len = n;
	return 0;
fail:
	free(buf);
	close(fd);
	return err;
}

int pctl_read_at(const char *root, const char *rel, char **data, size_t *len)
{
	char path[512];
	int ret = pctl_path(path, sizeof(path), root, rel);

	return ret ? ret : pctl_read_file(path, data, len);
}

int pctl_parse_u64(const char *s, uint64_t *val)
{
	uint64_t v = 0;

	if (!*s)
		return -EINVAL;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return -EINVAL;
		if (v > (UINT64_MAX - (uint64_t)(*s - '0')) / 10)
			return -ERANGE;
		v = v * 10 + (uint64_t)(*s - '0');
	}
	*val = v;
	return 0;
}

int pctl_read_u64_at(const char *root, const char *rel, uint64_t *val)
{
	char *data;
	size_t len;
	int ret = pctl_read_at(root, rel, &data, &len);

	if (ret)
		return ret;
	while (len && (data[len - 1] == '\n' || data[len - 1] == ' '))
		data[--len] = '\0';
	ret = pctl_parse_u64(data, val);
	free(data);
	return ret;
}

int pctl_kv_kb(const char *text, const char *key, uint64_t *bytes)
{
	size_t klen = strlen(key);
	const char *p = text;
	unsigned long long v;
	char unit[8] = "";

	while (p && *p) {
		if (!strncmp(p, key, klen) && p[klen] == ':') {
			int n = sscanf(p + klen + 1, "%llu %7s", &v, unit);

			if (n < 1)
				return -EINVAL;
			if (n == 2 && !strcmp(unit, "kB")) {
				if (v > UINT64_MAX / 1024)
					return -ERANGE;
				v *= 1024;
			}
			*bytes = v;
			return 0;
		}
		p = strchr(p, '\n');
		if (p)
			p++;
	}
	return -ENOENT;
}

/* Walk env->passwd with fgetpwent (no NSS), calling @match on each entry. */
static int passwd_file_find(const struct pctl_env *env, const char *name,
			    uint32_t uid, struct passwd *out, char *namebuf, size_t len)
{
	struct passwd *pw;
	FILE *f = fopen(env->passwd, "re");
	int ret = -ENOENT;

	if (!f)
		return -errno;
	while ((pw = fgetpwent(f))) {
		if (name ? !strcmp(pw->pw_name, name) : pw->pw_uid == uid) {
			out->pw_uid = pw->pw_uid;
			snprintf(namebuf, len, "%s", pw->pw_name);
			ret = 0;
			break;
		}
	}
	fclose(f);
	return ret;
}

int pctl_user_name(const struct pctl_env *env, uint32_t uid, char *buf, size_t len)
{
	struct passwd pwd, *pw = NULL;
	char tmp[1024];

	if (env->passwd[0]) {
		if (!passwd_file_find(env, NULL, uid, &pwd, buf, len))
			return 0;
	} else if (!getpwuid_r(uid, &pwd, tmp, sizeof(tmp), &pw) && pw) {
		snprintf(buf, len, "%s", pw->pw_name);
		return 0;
	}
	snprintf(buf, len, "%u", uid);
	return -ENOENT;
}

int pctl_user_uid(const struct pctl_env *env, const char *name, uint32_t *uid)
{
	struct passwd pwd, *pw = NULL;
	char tmp[1024], nb[64];
	uint64_t v;
	int ret;

	if (!*name)
		return -EINVAL;
	if (!pctl_parse_u64(name, &v)) {
		/* a numeric uid needs no account; (uid_t)-1 is never valid */
		if (v >= UINT32_MAX)
			return -ERANGE;
		*uid = (uint32_t)v;
		return 0;
	}
	if (env->passwd[0]) {
		ret = passwd_file_find(env, name, 0, &pwd, nb, sizeof(nb));
		if (!ret)
			*uid = pwd.pw_uid;
		return ret;
	}
	ret = getpwnam_r(name, &pwd, tmp, sizeof(tmp), &pw);
	if (ret)
		return -ret;
	if (!pw)
		return -ENOENT;
	*uid = pw->pw_uid;
	return 0;
}
