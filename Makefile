# SPDX-License-Identifier: GPL-2.0
# bbrx: out-of-tree build of tcp_bbrx.ko, and the project's commands. This
# file only dispatches: each target names the script that does the work,
# whose header says how. docs/testing.md lists the targets; which selftest
# runs where, in which form, is scripts/ci/lanes.conf alone.
# make check is what CI runs. KVER=NAME: a VM target on another pinned kernel
# (scripts/vm/kernels.conf). KDIR defaults to the running kernel's build tree,
# else (a build host, a container) the default pinned kernel's headers.

MAKEFLAGS += --no-print-directory
SHELL := /bin/bash
.SHELLFLAGS := -o pipefail -c
ROOT := $(abspath $(dir $(lastword $(MAKEFILE_LIST))))
S := $(ROOT)/scripts
CACHE := $(ROOT)/.cache

ifeq ($(origin KDIR),undefined)
  ifneq ($(wildcard /lib/modules/$(shell uname -r)/build/Makefile),)
    KDIR := /lib/modules/$(shell uname -r)/build
  else
    KDIR := $(addprefix /usr/src/linux-headers-,$(shell $(S)/vm/vm-kver 2>/dev/null))
    $(if $(KDIR),$(info bbrx: no build tree for $(shell uname -r); using $(KDIR)))
  endif
endif

KVER ?=
NO_KVER = $(error bbrx: KVER=$(KVER) is not a kernel of scripts/vm/kernels.conf)
VM_KVER = $(or $(shell $(S)/vm/vm-kver $(KVER)),$(NO_KVER))
LANE_K = $(if $(KVER),-k $(or $(shell $(S)/vm/vm-kver --name $(KVER)),$(NO_KVER)))
DEB_DIR := $(CACHE)/deb
# lane_kernels GROUP: the kernels lanes.conf gives GROUP lines
lane_kernels = $(shell awk -v g=$(1) '$$1 == g { n = split($$2, k, ","); \
	for (i = 1; i <= n; i++) print k[i] }' $(S)/ci/lanes.conf 2>/dev/null | sort -u)

.PHONY: all modules clean install load unload deps update-kernels vm-build demo \
	check check-version check-style check-docs check-sparse check-compile \
	check-dkms deb check-deb check-deb-trixie check-kselftest check-lanes \
	bench check-bench check-full-bench check-fidelity check-cost check-debug \
	check-scale check-full
all: modules
modules:
	@test -n "$(KDIR)" || { echo "bbrx: no kernel headers (set KDIR)" >&2; exit 1; }
	$(MAKE) -C $(KDIR) M=$(ROOT) W=1 modules
clean:
	@if [ -n "$(KDIR)" ]; then $(MAKE) -C $(KDIR) M=$(ROOT) clean; fi
	$(MAKE) -C $(ROOT)/selftests clean
install: modules
	$(MAKE) -C $(KDIR) M=$(ROOT) modules_install
	install -D -m 0644 $(S)/tcp_bbrx.modprobe.conf /etc/modprobe.d/tcp_bbrx.conf
load: modules
	insmod $(ROOT)/tcp_bbrx.ko
unload:
	rmmod tcp_bbrx

deps:
	@$(S)/deps
update-kernels:
	$(S)/vm/update-kernels
# the module and the selftests for the kernel the VM boots, whatever KDIR says
vm-build: deps
	$(MAKE) KDIR=/usr/src/linux-headers-$(VM_KVER) modules
	$(MAKE) -C $(ROOT)/selftests KDIR=/usr/src/linux-headers-$(VM_KVER)
demo:
	$(S)/demo-run $(KVER)

check:
	$(S)/ci/check
check-version:
	$(S)/ci/version-check
check-style: deps
	$(S)/ci/checkpatch
check-docs:
	$(S)/ci/docs-check
# W=1 and sparse for every pinned kernel, in parallel, into .cache/build/NAME
check-sparse check-compile: deps
	$(S)/vm/build-kernels
check-dkms: deps check-version
	$(S)/ci/dkms-check $(VM_KVER)
deb: check-version
	@$(S)/deps --deb
	$(S)/ci/deb-build $(DEB_DIR)
# the host's package in an overlay of the host, then the arm64 one in the
# arm64 chroot of its pinned kernels' suite, under qemu-user (deb-check)
check-deb: deps deb
	$(S)/ci/deb-check $(DEB_DIR)/$(shell $(S)/ci/deb-build --name)
	$(S)/ci/deb-build -a arm64 $(DEB_DIR)-arm64 >/dev/null
	$(S)/ci/deb-check $(DEB_DIR)-arm64/$(shell $(S)/ci/deb-build -a arm64 --name)
	DEB_CHECK_SUITE=bullseye $(S)/ci/deb-check $(DEB_DIR)/$(shell $(S)/ci/deb-build --name)
check-deb-trixie: deps deb
	DEB_CHECK_SUITE=trixie $(S)/ci/deb-check $(DEB_DIR)/$(shell $(S)/ci/deb-build --name)
check-kselftest: deps
	$(S)/ci/kselftest-check

# the selftests lanes.conf puts in GROUP, one VM boot per kernel (KVER: one)
check-lanes: deps
	$(S)/ci/lanes check $(LANE_K)
check-full-%: deps
	$(S)/ci/lanes full -k $*
check-stress-%: deps
	$(S)/ci/lanes stress -k $*
check-scale: deps
	$(S)/ci/lanes scale $(LANE_K)
check-cost: deps
	$(S)/ci/lanes cost $(LANE_K)
check-debug: deps
	$(S)/ci/lanes debug $(LANE_K)

bench: vm-build
	VM_KVER=$(VM_KVER) $(S)/bench/bench
# the bench's smoke form (QUICK=2) or short matrix (QUICK=1), checked for form
check-bench: deps
	VM_KVER=$(VM_KVER) QUICK=2 $(S)/bench/bench-check --run $(CACHE)/bench-check
check-full-bench: deps
	VM_KVER=$(VM_KVER) QUICK=1 $(S)/bench/bench-check --run $(CACHE)/bench-check-full
# bbrx against in-tree bbr, 7 alternating runs each on four paths (13 min)
check-fidelity: deps
	VM_KVER=$(VM_KVER) VM_KO=build BENCH_RESULTS=$(CACHE)/fidelity $(S)/bench/bench fidelity || \
		echo "bench: exit $$? (a flow or a boot failed); checking what it produced" >&2
	$(S)/bench/bench-fidelity $(CACHE)/fidelity

# each fits in CI's 90 minutes on its own; one at a time (one VM), idle host
.NOTPARALLEL:
check-full: $(addprefix check-full-,$(call lane_kernels,full)) \
	$(addprefix check-stress-,$(call lane_kernels,stress)) \
	check-full-bench check-fidelity check-cost check-deb check-deb-trixie
