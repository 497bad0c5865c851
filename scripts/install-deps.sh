#!/bin/sh
# SPDX-License-Identifier: MIT
# Installs the Debian/Ubuntu packages a make target needs, and nothing (not
# even `apt-get update`) when they are all there already.
#
#   scripts/install-deps.sh              everything `make check` needs: the
#                                        build, the tests, `make deb`, and the
#                                        VM kernels (Debian 12 gets the 6.12
#                                        kernel from bookworm-backports)
#   scripts/install-deps.sh --build-only what `make demo` needs to build the
#                                        library and the tools: no kernels,
#                                        no sources.list change
#   scripts/install-deps.sh --deb        what `make deb` needs
#   -n, --dry-run                        print what is missing, install nothing
set -eu

# Build: what `make` (library, pinctl, pinstream) and `make demo` need.
BUILD_PKGS="build-essential pkg-config liburing-dev"
# Tests: unit tests, sparse, the VM harness (and its ext4/XFS disks), the DKMS check,
# promtool (prometheus) for pinctl's metrics, systemd-analyze for the units,
# debootstrap and iproute2 (loopback in a network namespace) for the chroots,
# python3-dill for the dill cases of torch's DataLoader suite (python-check).
TEST_PKGS="libcmocka-dev sparse kmod busybox-static cpio qemu-system-x86 fio \
	dkms bc bison flex libelf-dev libssl-dev dwarves rsync xz-utils python3 \
	python3-dev python3-setuptools python3-numpy python3-pytest python3-torch python3-dill \
	python3-venv python3-wheel e2fsprogs xfsprogs zstd debootstrap prometheus systemd \
	iproute2"
# Packages: `make deb` (debhelper, dh-dkms, dh-python) and its lintian run.
DEB_PKGS="debhelper dh-dkms dh-python python3-dev python3-setuptools \
	fakeroot lintian"
KERNEL_PKGS="linux-image-amd64 linux-headers-amd64"

mode=check dry=0
for arg in "$@"; do
	case $arg in
	--build-only) mode=build ;;
	--deb) mode=deb ;;
	-n | --dry-run) dry=1 ;;
	*) echo "usage: $0 [--build-only | --deb] [--dry-run]" >&2; exit 2 ;;
	esac
done
case $mode in
build) pkgs=$BUILD_PKGS ;;
deb) pkgs="$BUILD_PKGS $DEB_PKGS" ;;
check) pkgs="$BUILD_PKGS $TEST_PKGS $DEB_PKGS $KERNEL_PKGS" ;;
esac

missing=
for p in $pkgs; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' ||
		missing="$missing $p"
done

# The VM matrix wants Debian 12's 6.1 and the backports' 6.12.
need_bpo=0
if [ "$mode" = check ]; then
	. /etc/os-release
	if [ "${VERSION_CODENAME:-}" = bookworm ] &&
	   ! ls /lib/modules/*/build/Makefile 2>/dev/null | grep -q '/6\.12\.'; then
		need_bpo=1
	fi
fi

[ -z "$missing" ] && [ "$need_bpo" = 0 ] && exit 0
if [ "$dry" = 1 ]; then
	echo "install-deps: would install${missing}$([ "$need_bpo" = 0 ] ||
		echo " $KERNEL_PKGS from bookworm-backports")"
	exit 0
fi

SUDO=
if [ "$(id -u)" != 0 ]; then
	command -v sudo >/dev/null || {
		echo "install-deps: missing${missing}; run this as root or install sudo" >&2
		exit 1
	}
	SUDO=sudo
fi

export DEBIAN_FRONTEND=noninteractive
if [ "$need_bpo" = 1 ] && ! grep -rqs bookworm-backports /etc/apt/sources.list /etc/apt/sources.list.d/; then
	echo "install-deps: adding bookworm-backports for the 6.12 kernel"
	printf 'Types: deb\nURIs: http://deb.debian.org/debian\nSuites: bookworm-backports\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' |
		$SUDO tee /etc/apt/sources.list.d/pinmem-backports.sources >/dev/null
fi
echo "install-deps: installing${missing}"
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $pkgs >/dev/null
if [ "$need_bpo" = 1 ]; then
	# shellcheck disable=SC2086
	$SUDO apt-get install -y -qq --no-install-recommends -t bookworm-backports $KERNEL_PKGS >/dev/null
fi
