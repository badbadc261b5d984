#!/usr/bin/env bash
# Runs Packer provisioning scripts on a stand-in machine: in a private mount namespace
# (`unshare -rm`), /etc, /opt, /usr and /var are copy-on-write overlays whose changes land
# in $1/upper and vanish with the namespace, /tmp is empty, and the tools the scripts call
# are tests/provision/fake (copied into $1/bin, each tool a relative link to the copy, first
# on PATH). The harness directory $1 is visible as /mnt: the scripts are in
# /mnt/packer/scripts, the stand-ins' state in /mnt/state. Nothing inside the machine may
# point into the checkout: it may live under /tmp, which is hidden here.
#
#   unshare -rm bash machine.sh DIR OS SCRIPT... (OS: ubuntu24.04, rockylinux9, …)
set -euo pipefail
dir=$1 os=$2
shift 2
for d in etc opt usr var; do
  mkdir -p "$dir/upper/$d" "$dir/work/$d"
done
mount --bind "$dir" /mnt
for d in etc opt usr var; do
  mount -t overlay overlay -o "lowerdir=/$d,upperdir=$dir/upper/$d,workdir=$dir/work/$d" "/$d"
done
mount -t tmpfs tmpfs /tmp
mkdir -p /etc/apt/sources.list.d /etc/yum.repos.d /etc/profile.d /etc/sysctl.d \
  /etc/modules-load.d /etc/security/limits.d /etc/systemd/system /etc/ld.so.conf.d /usr/share/keyrings \
  /usr/local/bin /usr/local/sbin
touch /etc/fstab
for s in "$@"; do
  echo "=== $s"
  env -i HOME=/root PATH=/mnt/bin:/usr/bin:/bin FAKE_STATE=/mnt/state FAKE_OS="$os" \
    GPUSTACK_MAX_JOBS=2 GPUSTACK_HUGEPAGES=0 GPUSTACK_MULTINODE=true \
    ${GPUSTACK_DRIVER_KERNEL_MODULES:+GPUSTACK_DRIVER_KERNEL_MODULES=$GPUSTACK_DRIVER_KERNEL_MODULES} \
    bash "/mnt/packer/scripts/$s"
done
