#!/bin/bash
# SPDX-License-Identifier: MIT
# The install rules leave the machine alone.  Run as root (as `make check`
# is), `make install`, `make uninstall`, `make dkms-install-src` and `make
# dkms-uninstall-src`, all with DESTDIR=<scratch>, must
#  - keep the type, mode and owner of /dev/null, /dev/zero, /tmp and the
#    other system paths those rules (with any PREFIX or DESTDIR) could touch,
#    and of every node under /dev;
#  - write, create, remove, chmod or chown nothing outside DESTDIR and the
#    build directory: a `find -newer/-cnewer` scan of every local file
#    system after the rules ran, against a marker made before, ignoring
#    the build tree, /proc, /sys, /run, /tmp and /var/tmp (scratch), logs
#    and the package and user caches, and in the checkout whatever git
#    tracks (other people's edits, not generated files).
# A changed mode or owner of a device node, /tmp or /var/tmp is put back
# (so a broken rule cannot leave /dev/null unusable for every other user),
# then the check fails.
#
#   install-guard.sh                  the check above
#   install-guard.sh snapshot FILE    record the guarded paths in FILE
#   install-guard.sh compare FILE     compare with FILE (put back and fail on
#                                     a difference); `make check` brackets
#                                     all its steps with these two
# Env: MAKE, O, PINMEM_GUARD_IGNORE (more paths for the scan to ignore,
# space-separated, shell patterns as find -path takes them).
set -euo pipefail
cd "$(dirname "$0")/../.."

MAKE=${MAKE:-make}
O=${O:-build}
me=install-guard
fail() { echo "$me: FAIL: $*" >&2; exit 1; }

# The paths an install, DKMS or package rule could touch by mistake, for
# PREFIX=/usr/local and /usr: each as "path type mode owner group dev", or
# "path absent" (a rule must not create them either).
guarded_paths() {
	local p d
	printf '%s\n' / /dev /dev/null /dev/zero /dev/full /dev/random /dev/urandom \
		/dev/tty /dev/shm /tmp /var/tmp /etc /etc/pinmem /etc/modprobe.d \
		/etc/modules-load.d /etc/udev/rules.d /etc/sysusers.d /etc/systemd/system \
		/usr/src /lib/modules /var/lib /var/lib/dkms /bin /lib /sbin
	for p in /usr /usr/local; do
		echo "$p"
		for d in bin sbin lib include include/pinmem share share/man \
			share/man/man1 share/man/man3 share/man/man7 share/man/man8 \
			lib/pkgconfig lib/udev lib/udev/rules.d lib/modules-load.d \
			lib/modprobe.d lib/sysusers.d lib/systemd lib/systemd/system \
			lib/python3 lib/python3/dist-packages; do
			echo "$p/$d"
		done
		for d in "$p"/lib/python3.*/dist-packages; do
			[ ! -e "$d" ] || echo "$d"
		done
	done
	for d in /lib/modules/*; do
		[ ! -d "$d" ] || printf '%s\n' "$d" "$d/updates"
	done
}

snapshot() {
	local p
	guarded_paths | while read -r p; do
		# Not following a last symbolic link (/lib on merged /usr).
		printf '%s %s\n' "$p" "$(stat -c '%F %a %U %G %t:%T' -- "$p" 2>/dev/null || echo absent)"
	done
}

# Every node under /dev (not the ptys) with its type, mode and owner.
dev_tree() {
	find /dev -xdev \( -path /dev/pts -o -path /dev/shm -o -path /dev/mqueue \) -prune \
		-o -printf '%p %y %m %u %g\n' 2>/dev/null | sort
}

# Compare snapshot FILE with now; put back a mode or owner that changed.
compare() {
	local before=$1 now bad=0 path rest was
	now=$(snapshot)
	while read -r path rest; do
		was=$(awk -v p="$path" '$1 == p { $1 = ""; sub(/^ /, ""); print; exit }' "$before")
		[ -n "$was" ] || continue  # a path that did not exist when FILE was made
		[ "$was" != "$rest" ] || continue
		echo "$me: $path was '$was', is now '$rest'" >&2
		bad=1
		restore "$path" "$was" "$rest"
	done <<< "$now"
	return $bad
}

# restore PATH "type mode owner group dev" (before) "..." (now): only the
# device nodes and the scratch directories, whose wrong mode breaks every
# other user at once; the rest is reported for a person to judge.
restore() {
	local path=$1 b m u g n
	read -r -a b <<< "$2"
	read -r -a n <<< "$3"
	case $path in /dev/* | /tmp | /var/tmp) ;; *) return 0 ;; esac
	[ "${b[0]}" != absent ] && [ "${n[0]}" != absent ] || return 0
	[ "${b[0]}" = "${n[0]}" ] || return 0
	# The type is the part of %F before the mode; the last four fields are
	# mode, owner, group, device.
	m=${b[-4]} u=${b[-3]} g=${b[-2]}
	[ "${n[-4]}" = "$m" ] || { chmod "$m" -- "$path" &&
		echo "$me: put $path back to mode $m" >&2; } || true
	[ "${n[-3]}:${n[-2]}" = "$u:$g" ] || { chown -h "$u:$g" -- "$path" &&
		echo "$me: put $path back to owner $u:$g" >&2; } || true
}

case ${1:-} in
snapshot)
	[ $# = 2 ] || fail "usage: $0 snapshot FILE"
	snapshot > "$2"
	echo "$me: recorded $(wc -l < "$2") system paths in $2"
	exit 0 ;;
compare)
	[ $# = 2 ] || fail "usage: $0 compare FILE"
	[ -f "$2" ] || fail "no snapshot $2 (run '$0 snapshot $2' first)"
	compare "$2" || fail "system paths changed since $2 was recorded (see above)"
	echo "$me: OK: the $(wc -l < "$2") system paths of $2 are as they were"
	exit 0 ;;
'') ;;
*) fail "usage: $0 [snapshot FILE | compare FILE]" ;;
esac

root=$(pwd -P)
case $O in /*) build=$O ;; *) build=$root/$O ;; esac
tmp=$(mktemp -d /tmp/pinmem-guard.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
dest=$tmp/dest

snapshot > "$tmp/paths.before"
dev_tree > "$tmp/dev.before"
touch "$tmp/marker"
# Inode times come from a clock that ticks every few ms: a change in the
# marker's own tick would not be newer than it.
sleep 0.05

rc=0
for target in install uninstall dkms-install-src dkms-uninstall-src; do
	echo "$me: make $target DESTDIR=$dest"
	$MAKE --no-print-directory "$target" DESTDIR="$dest" > "$tmp/make.log" 2>&1 ||
		{ cat "$tmp/make.log" >&2; echo "$me: make $target failed" >&2; rc=1; break; }
done

# The file systems to scan: / and whatever else is mounted under the usual
# top-level directories (each with -xdev; /dev is compared node by node).
roots=/
for d in /usr /var /etc /opt /srv /home /root /boot /work; do
	[ -d "$d" ] && mountpoint -q "$d" 2>/dev/null && roots="$roots $d"
done
prune=(/proc /sys /run /dev /tmp /var/tmp /var/log /var/cache /var/lib/apt
	/var/lib/dpkg /var/lib/systemd /var/lib/dhcp /var/spool /var/mail
	'/root/.cache' '/home/*/.cache' "$build" "$root/.git" "$dest")
for p in ${PINMEM_GUARD_IGNORE:-}; do prune+=("$p"); done
args=()
for p in "${prune[@]}"; do args+=(-o -path "$p"); done
# shellcheck disable=SC2086
find $roots -xdev \( "${args[@]:1}" \) -prune -o \
	\( -newer "$tmp/marker" -o -cnewer "$tmp/marker" \) -print 2>/dev/null |
	sort -u > "$tmp/changed.all" || true

# In the checkout: files git does not track (generated ones; directories
# and tracked files change under concurrent edits, and `git status` shows
# a rule that edits a tracked file).
git -C "$root" ls-files -z 2>/dev/null | tr '\0' '\n' | sed "s|^|$root/|" | sort > "$tmp/tracked" || true
while read -r f; do
	case $f in
	"$root" | "$root"/*)
		[ ! -d "$f" ] || [ -L "$f" ] || continue
		grep -qxF -- "$f" "$tmp/tracked" && continue ;;
	esac
	echo "$f"
done < "$tmp/changed.all" > "$tmp/changed"

if [ -s "$tmp/changed" ]; then
	echo "$me: written, created or chmod'ed outside DESTDIR and $build:" >&2
	sed 's/^/  /' "$tmp/changed" | head -n 40 >&2
	rc=1
fi
dev_tree > "$tmp/dev.after"
if ! cmp -s "$tmp/dev.before" "$tmp/dev.after"; then
	echo "$me: nodes under /dev changed (type, mode, owner):" >&2
	diff "$tmp/dev.before" "$tmp/dev.after" | grep '^[<>]' | head -n 20 >&2 || true
	rc=1
fi
compare "$tmp/paths.before" || rc=1

[ "$rc" = 0 ] || fail "make install/uninstall/dkms-install-src/dkms-uninstall-src DESTDIR=... touched the system (see above)"
[ "$(id -u)" = 0 ] || echo "$me: note: not root; a rule that chmods a system path fails instead of changing it"
echo "$me: OK: install, uninstall, dkms-install-src, dkms-uninstall-src left /dev, /tmp and the system paths as they were; nothing written outside DESTDIR and $O"
