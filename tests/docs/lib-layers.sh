#!/bin/bash
# SPDX-License-Identifier: MIT
# `make lib-layers-check`: dependencies in lib/ point one way.
#
# The layers below, from the bottom; a module is a header and the .c files
# that implement it.  A file may include (#include "...") the header of its
# own module or of a module in a lower layer, never one in its own layer or
# above: so the leaves (pinning, page mapping, refusal sentences, backends)
# take what they need as arguments, nothing below the context reaches back
# into it, and no two files form a circle.  Every lib/ file must be listed,
# so a new file gets a place on purpose.
set -euo pipefail
cd "$(dirname "$0")/../.."

# layer module: files
LAYERS='
0 api: include/pinmem.h include/pinmem_stream.h include/uapi/pinmem.h
1 sys: lib/sys.h lib/sys.c
1 fmt: lib/fmt.h lib/fmt.c
1 numa: lib/numa.h lib/numa.c
1 fault: lib/fault.h lib/fault.c
1 backend: lib/backend.h lib/backend.c lib/backend_host.c lib/backend_cuda.c
1 version: lib/version.c
2 pages: lib/pages.h lib/pages.c
2 refusal: lib/refusal.h lib/refusal.c
3 pin: lib/pin.h lib/pin.c
4 buf: lib/buf.h lib/buf.c
5 ctx: lib/ctx.h lib/ctx.c lib/ctx_buf.c lib/ctx_dev.c lib/uring.c
6 crc32c: lib/stream/crc32c.h lib/stream/crc32c.c
6 manifest: lib/stream/manifest.h lib/stream/manifest.c lib/stream/manifest_tar.c
6 populate: lib/stream/populate.h lib/stream/populate.c
6 hist: lib/stream/stream_hist.h lib/stream/stream_hist.c
7 plan: lib/stream/plan.h lib/stream/plan.c
7 reader: lib/stream/reader.h lib/stream/reader.c
8 files: lib/stream/stream_files.h lib/stream/stream_files.c
9 stream: lib/stream/stream_int.h lib/stream/stream.c lib/stream/stream_next.c lib/stream/lane.c
'

declare -A layer_of module_of by_name
while read -r n mod files; do
	[ -n "$n" ] || continue
	mod=${mod%:}
	for f in $files; do
		layer_of[$f]=$n
		module_of[$f]=$mod
		by_name[$(basename "$f")]=$f
	done
done <<< "$LAYERS"

errors=0
bad() { echo "lib-layers: FAIL: $*" >&2; errors=$((errors + 1)); }

for f in $(find lib -name '*.[ch]' | sort); do
	[ -n "${layer_of[$f]:-}" ] || { bad "$f is in no layer: add it to LAYERS in $0"; continue; }
done
for f in "${!layer_of[@]}"; do
	case $f in include/*) continue ;; esac
	[ -f "$f" ] || bad "$f is listed in LAYERS but does not exist"
done

nfiles=0 nincl=0
for f in $(find lib -name '*.[ch]' | sort); do
	[ -n "${layer_of[$f]:-}" ] || continue
	nfiles=$((nfiles + 1))
	while IFS=: read -r line hdr; do
		nincl=$((nincl + 1))
		case $hdr in
		uapi/*) target=include/$hdr ;;
		*) target=${by_name[$(basename "$hdr")]:-} ;;
		esac
		if [ -z "$target" ]; then
			bad "$f:$line includes \"$hdr\", which no layer lists"
			continue
		fi
		[ "${module_of[$target]}" = "${module_of[$f]}" ] && continue
		if [ "${layer_of[$target]}" -ge "${layer_of[$f]}" ]; then
			bad "$f:$line (${module_of[$f]}, layer ${layer_of[$f]}) includes \"$hdr\" (${module_of[$target]}, layer ${layer_of[$target]}): only headers of lower layers"
		fi
	done < <(grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f" |
		 sed 's/^\([0-9]*\):[^"]*"\([^"]*\)".*/\1:\2/')
done

[ "$errors" = 0 ] || { echo "lib-layers: $errors failure(s)" >&2; exit 1; }
echo "lib-layers: OK ($nfiles files, $nincl includes, each only of lower layers)"
