# SPDX-License-Identifier: GPL-2.0
#
# bbrx: out-of-tree build of tcp_bbrx.ko and the project's commands.
#
#   make                 build against KDIR (see below)
#   make install         modules_install (runs depmod) + modprobe.d hook (root)
#   make load / unload   insmod / rmmod the built module on this host
#   make demo            build for the VM kernel, boot it, print a comparison
#   make check           style, sparse, W=1, DKMS and rt builds, the quick
#                        bench (check-bench), selftests in the VM
#   make bench           build, boot the VM, run the benchmark matrix: results/
#                        (QUICK=1 a short subset, REPS=N repetitions)
#   make clean
#
# KDIR defaults to the running kernel's build tree; where that does not exist
# (a build host, a container) the newest installed Debian cloud headers.
# demo and check always build against the headers of the kernel the VM boots.

MAKEFLAGS += --no-print-directory
SHELL := /bin/bash
# A failed make piped into tee must fail the recipe.
.SHELLFLAGS := -o pipefail -c
ROOT := $(abspath $(dir $(lastword $(MAKEFILE_LIST))))

VERSION := $(shell sed -n 's/^\#define BBRX_VERSION "\(.*\)"/\1/p' $(ROOT)/include/bbrx.h)
DKMS_VERSION := $(shell sed -n 's/^PACKAGE_VERSION="\(.*\)"/\1/p' $(ROOT)/dkms.conf)

ifeq ($(origin KDIR),undefined)
  ifneq ($(wildcard /lib/modules/$(shell uname -r)/build/Makefile),)
    KDIR := /lib/modules/$(shell uname -r)/build
  else
    KDIR := $(lastword $(shell ls -d /usr/src/linux-headers-*-cloud-amd64 2>/dev/null | sort -V))
    $(if $(KDIR),$(info bbrx: no build tree for $(shell uname -r); using $(KDIR)))
  endif
endif

# The VM's kernel and its headers; the rt flavour of the same ABI if present.
VM_KVER = $(shell $(ROOT)/scripts/vm-kver)
VM_KDIR = /usr/src/linux-headers-$(VM_KVER)
RT_KDIR = $(lastword $(shell ls -d /usr/src/linux-headers-*-rt-amd64 2>/dev/null | sort -V))
CACHE := $(ROOT)/.cache
KBUILD_OPTS := W=1

.PHONY: all modules clean install load unload deps vm-build demo check \
	check-style check-sparse check-dkms check-rt check-version \
	bench check-bench check-cost

all: modules

modules:
	@test -n "$(KDIR)" || { echo "bbrx: no kernel headers (set KDIR)" >&2; exit 1; }
	$(MAKE) -C $(KDIR) M=$(ROOT) $(KBUILD_OPTS) modules

clean:
	@if [ -n "$(KDIR)" ]; then $(MAKE) -C $(KDIR) M=$(ROOT) clean; fi
	$(MAKE) -C $(ROOT)/selftests clean

install: modules
	$(MAKE) -C $(KDIR) M=$(ROOT) modules_install
	install -D -m 0644 $(ROOT)/scripts/tcp_bbrx.modprobe.conf /etc/modprobe.d/tcp_bbrx.conf

load: modules
	insmod $(ROOT)/tcp_bbrx.ko

unload:
	rmmod tcp_bbrx

deps:
	@$(ROOT)/scripts/deps.sh

# Build for the kernel the VM boots, whatever KDIR says.
vm-build: deps
	$(MAKE) KDIR=$(VM_KDIR) modules
	$(MAKE) -C $(ROOT)/selftests KDIR=$(VM_KDIR)

# The demo runs next to the selftests' lib.sh in a staged copy.
demo: vm-build
	rm -rf $(CACHE)/demo && mkdir -p $(CACHE)/demo
	cp -r $(ROOT)/selftests/. $(ROOT)/scripts/demo.sh $(CACHE)/demo/
	$(ROOT)/scripts/vm-run --dir $(CACHE)/demo -- ./demo.sh

# The benchmark matrix (scripts/bench-matrix.sh), one VM boot per scenario;
# tables, JSON and plots in results/ (git-ignored).
bench: vm-build
	$(ROOT)/scripts/bench

# The quickest bench once, into the cache (results/ keeps the last real
# run), then its report and plots checked for form, not numbers.
BENCH_CHECK_DIR := $(CACHE)/bench-check
check-bench: vm-build
	QUICK=1 BENCH_RESULTS=$(BENCH_CHECK_DIR) $(ROOT)/scripts/bench || \
		echo "bench: exit $$? (a flow or a boot failed); checking what it produced" >&2
	$(ROOT)/scripts/bench-check $(BENCH_CHECK_DIR)

check-version:
	@test "$(VERSION)" = "$(DKMS_VERSION)" || \
		{ echo "bbrx: version $(VERSION) in include/bbrx.h but $(DKMS_VERSION) in dkms.conf" >&2; exit 1; }

check-style: deps
	$(ROOT)/scripts/checkpatch.sh

check-sparse: deps
	$(MAKE) -C $(VM_KDIR) M=$(ROOT) W=1 C=2 modules 2>&1 | tee $(CACHE)/sparse.log
	@! grep -E 'warning:|error:' $(CACHE)/sparse.log || \
		{ echo "bbrx: sparse or W=1 warnings (above)" >&2; exit 1; }

check-dkms: deps check-version
	$(ROOT)/scripts/dkms-check.sh $(VM_KVER)

check-rt: deps
	@test -n "$(RT_KDIR)" || { echo "bbrx: no rt headers installed" >&2; exit 1; }
	rm -rf $(CACHE)/rt && mkdir -p $(CACHE)/rt
	cp -r $(ROOT)/Kbuild $(ROOT)/module $(ROOT)/include $(CACHE)/rt/
	$(MAKE) -C $(RT_KDIR) M=$(CACHE)/rt W=1 modules 2>&1 | tee $(CACHE)/rt.log
	@! grep -E 'warning:|error:' $(CACHE)/rt.log

# hook_cost.sh in a VM whose clock counts instructions (selftests/Makefile,
# TEST_PROGS_ICOUNT says why).
check-cost: vm-build
	$(ROOT)/scripts/vm-run --icount --timeout 2400 -- KSFT_FAIL_ON_SKIP=1 make run_icount

# check-bench and check-cost before the selftests, so that their runner's
# "N passed, N failed" line stays the last one.
check: check-version check-style check-sparse check-dkms check-rt vm-build check-bench check-cost
	$(ROOT)/scripts/vm-run -- KSFT_FAIL_ON_SKIP=1 make run_tests
