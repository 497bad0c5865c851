#!/bin/bash
# SPDX-License-Identifier: MIT
# The install rules leave the machine alone.  `make install`, `make
# uninstall`, `make dkms-install-src` and `make dkms-uninstall-src`, all
# with DESTDIR=<scratch>, run in a private mount namespace in which every
# mount is read-only except DESTDIR, the build directory and a scratch
# TMPDIR.  A rule that writes, creates, removes, chmods or chowns anything
# else fails with EROFS; one that hides the failure (`-`, `|| true`) is
# caught by its "Read-only file system" message.  Device nodes stay
# writable (a read-only mount does not stop writes to /dev/null) but not
# chmod-able.  Unlike a scan of what changed on the machine, this sees only
# what the rules do, not what other programs write meanwhile (a CI log).
# Needs root or unprivileged user namespaces (then it runs as a mapped
# root: files it reads keep their owners' rights).
#
#   install-guard.sh                  the check above
#   install-guard.sh selftest         the sandbox catches rules that write,
#                                     chmod or remove outside DESTDIR (also
#                                     when they ignore the error) and lets
#                                     a good rule through
#   install-guard.sh snapshot FILE    record the guarded paths in FILE
#   install-guard.sh compare FILE     compare with FILE (put back and fail on
#                                     a difference); `make check` brackets
#                                     all its steps with these two
# Env: MAKE, O.
set -euo pipefail
self=$(cd "$(dirname "$0")" && pwd -P)/$(basename "$0")
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
'' | sandboxed | selftest) ;;
*) fail "usage: $0 [snapshot FILE | compare FILE | selftest]" ;;
esac

# sandboxed DEST BUILD SCRATCH TARGET...: inside the mount namespace, make
# every mount read-only, bind DEST, BUILD and SCRATCH writable over
# themselves, then run make TARGET... with TMPDIR=SCRATCH.
sandboxed() {
	local dest=$1 build=$2 scratch=$3 m err bad=0 d target
	shift 3
	# Mount points as /proc/self/mountinfo spells them (\040 for a space,
	# which printf %b reads as \0040).
	while read -r m; do
		m=$(printf '%b' "${m//\\/\\0}")
		# (No file open for writing here: a mount with a writer stays rw.)
		err=$(mount -o remount,bind,ro -- "$m" 2>&1) && continue
		case $m in
		# Where no install rule writes and a remount may be refused
		# (a locked or special file system).
		/proc | /proc/* | /sys | /sys/* | /dev/pts | /dev/mqueue) ;;
		*) echo "$me: cannot make $m read-only: $err" >&2; bad=1 ;;
		esac
	done < <(awk '{ print $5 }' /proc/self/mountinfo)
	[ "$bad" = 0 ] || return 1
	for d in "$dest" "$build" "$scratch"; do
		if ! { mount --bind -- "$d" "$d" && mount -o remount,bind,rw -- "$d"; }; then
			echo "$me: cannot bind $d writable" >&2
			return 1
		fi
	done
	# The sandbox holds: / and the checkout refuse a new file.
	for d in / "$PWD"; do
		case $d/ in "$dest"/* | "$build"/* | "$scratch"/*) continue ;; esac
		if touch "$d/.install-guard-probe" 2> /dev/null; then
			rm -f "$d/.install-guard-probe"
			echo "$me: $d is still writable in the sandbox" >&2
			return 1
		fi
	done
	for target; do
		echo "$me: make $target DESTDIR=$dest"
		if ! TMPDIR=$scratch $MAKE --no-print-directory "$target" DESTDIR="$dest" > "$scratch/make.log" 2>&1; then
			cat "$scratch/make.log" >&2
			echo "$me: make $target failed (a write outside DESTDIR and $build fails here with EROFS)" >&2
			return 1
		fi
		if grep -i 'read-only file system' "$scratch/make.log" >&2; then
			echo "$me: make $target tried to write outside DESTDIR and $build (above), and went on" >&2
			return 1
		fi
	done
}

# In a mount namespace of our own (a mapped root's when not root).
in_namespace() {
	local ns
	if [ "$(id -u)" = 0 ]; then ns=(unshare --mount --propagation private)
	else ns=(unshare --user --map-root-user --mount --propagation private); fi
	"${ns[@]}" true 2> "$tmp/unshare.err" ||
		fail "cannot make a mount namespace ($(cat "$tmp/unshare.err")): run as root, or enable unprivileged user namespaces"
	"${ns[@]}" "$@"
}

# Rules that misbehave in each way the sandbox must catch, and one that
# does what install rules do (write DESTDIR, /dev/null, TMPDIR).
selftest() {
	local victim=$tmp/victim t before
	mkdir -p "$victim" "$tmp/dest" "$tmp/scratch" "$tmp/build"
	echo kept > "$victim/file"
	chmod 644 "$victim/file"
	before=$(stat -c '%a %s %Y' "$victim/file"; ls -A "$victim")
	# (printf: a here-document would lose the recipes' tabs.)
	printf '%s:\n\t%s\n' \
		write "echo x >> $victim/file" \
		create-ignored "-touch $victim/new" \
		chmod-ignored "chmod 600 $victim/file || true" \
		remove-ignored "rm -f $victim/file 2>&1 || true" > "$tmp/Makefile"
	printf 'good:\n\t%s\n\t%s\n\t%s\n\t%s\n' "echo x > /dev/null" \
		"mktemp > /dev/null" "touch $tmp/build/made" \
		"install -D -m 644 $tmp/Makefile \$(DESTDIR)/share/pinmem/Makefile" >> "$tmp/Makefile"
	for t in write create-ignored chmod-ignored remove-ignored; do
		if MAKE="make -f $tmp/Makefile" in_namespace "$self" sandboxed "$tmp/dest" "$tmp/build" "$tmp/scratch" "$t" > "$tmp/out" 2>&1; then
			cat "$tmp/out" >&2
			fail "selftest: a rule '$t' outside DESTDIR got through"
		fi
		grep -q "tried to write outside\|failed (a write outside" "$tmp/out" ||
			{ cat "$tmp/out" >&2; fail "selftest: '$t' failed, but not for the write"; }
	done
	[ "$(stat -c '%a %s %Y' "$victim/file"; ls -A "$victim")" = "$before" ] ||
		fail "selftest: a rule changed $victim despite the sandbox"
	MAKE="make -f $tmp/Makefile" in_namespace "$self" sandboxed "$tmp/dest" "$tmp/build" "$tmp/scratch" good > "$tmp/out" 2>&1 ||
		{ cat "$tmp/out" >&2; fail "selftest: a rule writing only DESTDIR, the build directory, TMPDIR and /dev/null was refused"; }
	if [ ! -f "$tmp/dest/share/pinmem/Makefile" ] || [ ! -f "$tmp/build/made" ]; then
		fail "selftest: the good rule's files are missing"
	fi
	echo "$me: selftest OK: writing, creating (ignored), chmod (ignored) and removing (ignored) outside DESTDIR caught; DESTDIR, build, TMPDIR and /dev/null writable"
}

case ${1:-} in
sandboxed) shift; sandboxed "$@"; exit ;;
esac

tmp=$(mktemp -d /tmp/pinmem-guard.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
if [ "${1:-}" = selftest ]; then
	selftest
	exit 0
fi

mkdir -p "$O"
build=$(cd "$O" && pwd -P)
mkdir -p "$tmp/dest" "$tmp/scratch"
snapshot > "$tmp/paths.before"
rc=0
MAKE=$MAKE in_namespace "$self" sandboxed "$tmp/dest" "$build" "$tmp/scratch" \
	install uninstall dkms-install-src dkms-uninstall-src || rc=1
compare "$tmp/paths.before" || rc=1

[ "$rc" = 0 ] || fail "make install/uninstall/dkms-install-src/dkms-uninstall-src DESTDIR=... touched the system (see above)"
echo "$me: OK: install, uninstall, dkms-install-src, dkms-uninstall-src wrote only DESTDIR, $O and TMPDIR, in a read-only mount namespace"
