#!/bin/sh
# SPDX-License-Identifier: MIT
# Installs what `make check` needs on Debian/Ubuntu, and nothing when it is
# all there already.  Debian 12 gets the 6.12 kernel from bookworm-backports.
set -eu

PKGS="build-essential pkg-config liburing-dev libcmocka-dev sparse kmod \
	busybox-static cpio qemu-system-x86 fio dkms bc bison flex libelf-dev \
	libssl-dev dwarves rsync xz-utils python3 \
	python3-dev python3-setuptools python3-numpy python3-pytest python3-torch"
KPKGS="linux-image-amd64 linux-headers-amd64"

SUDO=
[ "$(id -u)" = 0 ] || SUDO=sudo

missing=
for p in $PKGS $KPKGS; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' ||
		missing="$missing $p"
done

. /etc/os-release
need_bpo=0
if [ "${VERSION_CODENAME:-}" = bookworm ] &&
   ! ls /lib/modules/*/build/Makefile 2>/dev/null | grep -q '/6\.12\.'; then
	need_bpo=1
fi

[ -z "$missing" ] && [ "$need_bpo" = 0 ] && exit 0

export DEBIAN_FRONTEND=noninteractive
if [ "$need_bpo" = 1 ] && ! grep -rqs bookworm-backports /etc/apt/sources.list /etc/apt/sources.list.d/; then
	echo "install-deps: adding bookworm-backports for the 6.12 kernel"
	printf 'Types: deb\nURIs: http://deb.debian.org/debian\nSuites: bookworm-backports\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' |
		$SUDO tee /etc/apt/sources.list.d/pinmem-backports.sources >/dev/null
fi
echo "install-deps: installing$missing"
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $PKGS $KPKGS >/dev/null
if [ "$need_bpo" = 1 ]; then
	$SUDO apt-get install -y -qq --no-install-recommends -t bookworm-backports $KPKGS >/dev/null
fi
