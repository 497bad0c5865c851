# SPDX-License-Identifier: MIT
# What dkms-check.sh and deb-check.sh check of a module DKMS installed: the
# two install it through different front doors (make dkms-install-src and
# dkms by hand; the pinmem-dkms package's postinst) and check the result
# the same way.  Sourced (bash); the caller defines fail() and has(), and
# sets VERSION, tmp (a scratch directory) and me (the name to print).

# dkms_check_ko KO KVER ROOT: KO says version VERSION, was built for KVER,
# and `modprobe` finds it once depmod ran on ROOT ("" is the real system).
dkms_check_ko() {
	local ko=$1 kv=$2 root=$3 v magic
	v=$(modinfo -F version "$ko")
	[ "$v" = "$VERSION" ] || fail "$ko: modinfo version '$v', VERSION says '$VERSION'"
	magic=$(modinfo -F vermagic "$ko")
	[ "${magic%% *}" = "$kv" ] || fail "$ko: vermagic '$magic' is not for $kv"
	modprobe -d "${root:-/}" -S "$kv" --show-depends pinmem | has "pinmem.ko" ||
		fail "modprobe -S $kv cannot find pinmem after dkms install"
}

# dkms_check_signed KO CERT: the module carries a signature by the key of
# CERT (DER, as dkms writes mok.pub, or PEM), the machine's MOK key that a
# Secure Boot machine enrolls.  modinfo's sig_key is the signer's id in the
# signature: the certificate's serial number (sign-file's default, what dkms
# runs) or, signed with sign-file -k, its subject key identifier.
dkms_check_signed() {
	local ko=$1 cert=$2 form=DER have ids
	[ -f "$cert" ] || fail "$ko: no signing certificate $cert after dkms build (dkms makes one on first use)"
	openssl x509 -inform DER -in "$cert" -noout 2>/dev/null || form=PEM
	have=$(modinfo -F sig_key "$ko" | tr -d ': ' | tr a-f A-F | sed 's/^0*//')
	[ -n "$have" ] || fail "$ko is not signed (dkms signs with $cert)"
	ids=$(openssl x509 -inform $form -in "$cert" -noout -serial -ext subjectKeyIdentifier |
		sed -e 's/^serial=//' -e '/Subject Key Identifier/d' | tr -d ': ' | tr a-f A-F | sed 's/^0*//')
	printf '%s\n' "$ids" | has -x "$have" ||
		fail "$ko is signed by key $(modinfo -F sig_key "$ko"), not by $cert (serial and key id: $(echo $ids))"
}

# dkms_ko_params KO: the module's parameter names, one a line, from the
# kernel_param structs (__param_NAME), which module_param_cb() makes too;
# modinfo's parm also lists a MODULE_PARM_DESC() without a parameter, and
# parmtype misses the _cb ones.
dkms_ko_params() {
	case $1 in
	*.xz) xz -dc "$1" ;; *.zst) zstd -dc "$1" ;; *.gz) gzip -dc "$1" ;; *) cat "$1" ;;
	esac > "$tmp/params.ko"
	nm "$tmp/params.ko" | sed -n 's/.* __param_\([a-z0-9_]*\)$/\1/p' | grep -v '^str_'
}

# dkms_check_modprobe_conf CONF KO: the documented `options pinmem` example
# in CONF names only parameters KO has.
dkms_check_modprobe_conf() {
	local conf=$1 ko=$2 opts parms o
	opts=$(sed -n 's/^#[[:space:]]*options[[:space:]]\+pinmem[[:space:]]\+//p' "$conf" |
		tr ' ' '\n' | cut -d= -f1 | sort -u)
	[ -n "$opts" ] || fail "$conf shows no 'options pinmem' example"
	parms=$(dkms_ko_params "$ko")
	for o in $opts; do
		printf '%s\n' $parms | has -x "$o" ||
			fail "$conf names '$o', not a parameter of pinmem.ko ($(echo $parms))"
	done
}

# dkms_check_autoinstall KVER INSTALLTREE [DKMS OPTIONS...]: with AUTOINSTALL
# in dkms.conf, what a new kernel's postinst hook runs (dkms autoinstall)
# puts the module back after an uninstall.
dkms_check_autoinstall() {
	local kv=$1 tree=$2
	shift 2
	dkms uninstall "$@" "pinmem/$VERSION" -k "$kv" > "$tmp/dkms.log" 2>&1 ||
		{ cat "$tmp/dkms.log" >&2; fail "dkms uninstall pinmem/$VERSION -k $kv"; }
	[ -z "$(find "$tree/$kv" -name 'pinmem.ko*')" ] || fail "dkms uninstall -k $kv left the module"
	dkms autoinstall "$@" -k "$kv" > "$tmp/dkms.log" 2>&1 ||
		{ cat "$tmp/dkms.log" >&2; fail "dkms autoinstall -k $kv"; }
	[ -n "$(find "$tree/$kv" -name 'pinmem.ko*')" ] ||
		fail "dkms autoinstall -k $kv did not reinstall pinmem (AUTOINSTALL in dkms.conf?)"
	echo "$me: $kv: dkms autoinstall reinstalls it"
}
