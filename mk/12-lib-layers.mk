# SPDX-License-Identifier: MIT
# `make lib-layers-check`: lib/ has no include circle.  tests/docs/lib-layers.sh
# lists lib/'s layers (leaves: system calls, sizes, NUMA, faulting, page
# mapping, refusal sentences, pinning, copy backends; then buffers, the
# context, the stream) and fails when a file includes a header of its own
# layer or one above it.

.PHONY: lib-layers-check
lib-layers-check:
	tests/docs/lib-layers.sh

CHECK_STEPS += lib-layers-check
