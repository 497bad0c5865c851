// SPDX-License-Identifier: MIT
/*
 * Help texts with examples, shared by `pinctl help CMD` and `pinctl CMD
 * --help`; the man page (man/pinctl.8) says the same at more length.
 */
#include "pinctl.h"

void pctl_help_main(FILE *f)
{
	fputs("Usage: pinctl COMMAND [OPTIONS]\n"
	      "See and manage locked-page budgets of the pinmem module.\n"
	      "\n"
	      "Commands:\n"
	      "  status         pinned memory now: global budget, users, processes\n"
	      "  top            status, refreshed on an interval, largest first\n"
	      "  limits         show the budgets; `limits set` changes them (root)\n"
	      "  doctor         check what stops this user from pinning\n"
	      "  help [CMD]     this text, or the help of CMD\n"
	      "\n"
	      "Options:\n"
	      "  -h, --help     show help (also after any command)\n"
	      "  -V, --version  show the version and the module ABI it speaks\n"
	      "\n"
	      "Read commands take --json.  Without the module, status and top show\n"
	      "the whole machine from the kernel's own counters; no budget is then\n"
	      "enforced.\n"
	      "\n"
	      "Examples:\n"
	      "  pinctl status\n"
	      "  pinctl top -d 1\n"
	      "  sudo pinctl limits set --global 64G --user alice=16G --default-user 8G\n"
	      "  pinctl doctor\n"
	      "\n"
	      "Exit status: 0 success, 1 failure, 2 usage error.\n"
	      "Environment: PINCTL_PROC_ROOT, PINCTL_SYS_ROOT, PINCTL_DEV_ROOT move /proc,\n"
	      "/sys and /dev; PINCTL_PASSWD names a passwd file to use instead of NSS;\n"
	      "PINCTL_CUDA_LIB the CUDA driver library doctor tries (libcuda.so.1).\n", f);
}

void pctl_help_status(FILE *f)
{
	fputs("Usage: pinctl status [--json | --prometheus] [--source SRC]\n"
	      "Show pinned memory: the global budget with a bar, peak, refusals by\n"
	      "reason since load, a table per user (pinned / limit) and per process.\n"
	      "\n"
	      "  --json          one JSON object; bytes as integers, unlimited as null\n"
	      "  --prometheus    node exporter textfile format\n"
	      "  --source SRC    auto (default), proc (/proc/driver/pinmem/stats),\n"
	      "                  ioctl (STATS ioctl: global and your own user only),\n"
	      "                  kernel (no module: /proc/vmstat, meminfo, PID/status)\n"
	      "\n"
	      "Without the module the view is the whole machine: FOLL_PIN pages in use\n"
	      "(nr_foll_pin_acquired - nr_foll_pin_released, which also counts GPU and\n"
	      "RDMA driver pins), Mlocked, and VmPin/VmLck of each process.\n"
	      "\n"
	      "Prometheus metrics (gauges unless _total):\n"
	      "  pinmem_module_loaded, pinmem_machine_foll_pin_bytes,\n"
	      "  pinmem_machine_mlocked_bytes, pinmem_machine_memory_bytes,\n"
	      "  pinmem_pinned_bytes, pinmem_limit_bytes (+Inf: none), pinmem_peak_bytes,\n"
	      "  pinmem_regions, pinmem_pins_total, pinmem_unpins_total,\n"
	      "  pinmem_refused_total{reason=global|user|rlimit|fault},\n"
	      "  pinmem_default_user_limit_bytes, pinmem_enforce_rlimit,\n"
	      "  pinmem_user_{pinned_bytes,limit_bytes,peak_bytes,regions}{uid,user},\n"
	      "  pinmem_user_{pins,unpins}_total{uid,user},\n"
	      "  pinmem_user_refused_total{uid,user,reason},\n"
	      "  pinmem_process_{pinned_bytes,regions,mm_pinned_bytes}{pid,uid,user,comm},\n"
	      "  without the module: pinmem_process_{vmpin,vmlck}_bytes{pid,uid,user,comm}\n"
	      "\n"
	      "Examples:\n"
	      "  pinctl status\n"
	      "  pinctl status --json | jq '.users[] | {user, pinned_bytes}'\n"
	      "  pinctl status --prometheus > /var/lib/node_exporter/textfile/pinmem.prom.$$ &&\n"
	      "    mv /var/lib/node_exporter/textfile/pinmem.prom.$$ /var/lib/node_exporter/textfile/pinmem.prom\n",
	      f);
}

void pctl_help_top(FILE *f)
{
	fputs("Usage: pinctl top [-d SECONDS] [-n COUNT] [--json] [--source SRC]\n"
	      "Status refreshed every SECONDS (default 2), processes sorted by pinned\n"
	      "bytes.  On a terminal the screen is redrawn in place; otherwise each\n"
	      "refresh is printed after the previous one.\n"
	      "\n"
	      "  -d, --interval SECONDS   refresh interval, 0.1 to 86400 (decimals allowed)\n"
	      "  -n, --iterations COUNT   stop after COUNT refreshes (default: run until killed)\n"
	      "      --json               one JSON object per line and refresh\n"
	      "      --source SRC         as for status\n"
	      "\n"
	      "Examples:\n"
	      "  pinctl top\n"
	      "  pinctl top -d 0.5 -n 10 > pins.log\n"
	      "  pinctl top --json -n 60 -d 1 | jq .global.pinned_bytes\n", f);
}

void pctl_help_limits(FILE *f)
{
	fputs("Usage: pinctl limits [--json]\n"
	      "       pinctl limits set [--global SIZE] [--default-user SIZE]\n"
	      "                         [--user NAME=SIZE]... [--clear-user NAME]...\n"
	      "                         [--enforce-rlimit on|off] [--dry-run]\n"
	      "Show the budgets (module parameters, per-user overrides, your\n"
	      "RLIMIT_MEMLOCK), or change them.  Changing needs CAP_SYS_ADMIN.\n"
	      "\n"
	      "SIZE is bytes with an optional binary unit (K, M, G, T, P; KiB and KB\n"
	      "mean the same), a decimal such as 1.5G, a share of RAM such as 10%,\n"
	      "or `unlimited`.  NAME is a user name or a numeric uid.\n"
	      "Everything is checked before anything is changed; the global, default\n"
	      "and first user limit go in one call, each further user in its own;\n"
	      "if a later call fails, pinctl says exactly what was applied.\n"
	      "Lowering a limit below current use refuses new pins only.\n"
	      "\n"
	      "  --global SIZE          bytes the whole machine may pin\n"
	      "  --default-user SIZE    bytes a user without an override may pin\n"
	      "  --user NAME=SIZE       set NAME's override\n"
	      "  --clear-user NAME      drop NAME's override (back to the default)\n"
	      "  --enforce-rlimit on|off  check RLIMIT_MEMLOCK for callers without CAP_IPC_LOCK\n"
	      "  --dry-run              check and print what would be set, change nothing\n"
	      "\n"
	      "Examples:\n"
	      "  pinctl limits\n"
	      "  sudo pinctl limits set --global 64G --user alice=16G --default-user 8G\n"
	      "  sudo pinctl limits set --global 50% --clear-user alice\n"
	      "  sudo pinctl limits set --user bob=unlimited --enforce-rlimit off\n", f);
}

void pctl_help_doctor(FILE *f)
{
	fputs("Usage: pinctl doctor [--json]\n"
	      "Check what stops this user from pinning, and say what to do:\n"
	      "  module   pinmem loaded, ABI compatible with this pinctl\n"
	      "  device   /dev/pinmem exists and this user may open it\n"
	      "  memlock  RLIMIT_MEMLOCK of this shell against the pinmem budgets\n"
	      "  thp      transparent huge pages mode\n"
	      "  hugetlb  reserved hugetlb pages\n"
	      "  io_uring kernel.io_uring_disabled\n"
	      "  cuda     NVIDIA driver (/proc/driver/nvidia/version or libcuda.so.1)\n"
	      "Exit status 1 if any check fails (FAIL), 0 otherwise (ok, info, warn).\n"
	      "\n"
	      "Examples:\n"
	      "  pinctl doctor\n"
	      "  pinctl doctor --json | jq '.checks[] | select(.status != \"ok\")'\n", f);
}
