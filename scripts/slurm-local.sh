#!/usr/bin/env bash
# A real Slurm on this machine, for the Slurm executor's tests (tests/runs/test_slurm_cluster.py) and for trying it out:
# one CPU-only node named after this host, munge authentication, slurmctld and slurmd started in the background.
#
#   scripts/slurm-local.sh          install Debian's slurm-wlm and munge if missing, configure, start (as root)
#
# Idempotent: a second call finds the daemons answering and does nothing. It refuses to overwrite a slurm.conf it did
# not write (a real cluster's). Jobs finished within the last 10 minutes stay visible to squeue (MinJobAge), which is
# how grpo-studio reads a job's end state where there is no accounting database (sacct needs slurmdbd).
set -euo pipefail

CONF=/etc/slurm/slurm.conf
MARK="# written by grpo-studio scripts/slurm-local.sh"

if [ "$(id -u)" != 0 ]; then
  echo "slurm-local.sh: run as root (it installs packages and starts munged, slurmctld and slurmd)" >&2
  exit 1
fi
if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
  apt-get install -y -qq slurm-wlm munge >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq slurm-wlm munge >/dev/null; }
fi
if sinfo -h -o %T 2>/dev/null | grep -qE '^(idle|mixed|allocated)'; then
  exit 0  # already up
fi

host=$(hostname -s)
if [ -f "$CONF" ] && ! grep -qF "$MARK" "$CONF"; then
  echo "slurm-local.sh: $CONF exists and was not written by this script; leaving it alone" >&2
  exit 1
fi
mkdir -p /etc/slurm /var/spool/slurmctld /var/spool/slurmd /var/log/slurm /run/munge /var/lib/munge /var/log/munge
# More CPUs than the machine has (config_overrides accepts that): the tests run three small jobs side by side.
cat >"$CONF" <<EOF
$MARK
ClusterName=grpo-local
SlurmctldHost=$host
SlurmUser=root
AuthType=auth/munge
CredType=cred/munge
# no cgroup hierarchy in a container: track job processes by parent pid, bind nothing
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
ReturnToService=2
MinJobAge=600
KillWait=30
NodeName=$host CPUs=16 State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF

if [ ! -s /etc/munge/munge.key ]; then
  dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
fi
chown -R munge:munge /etc/munge /run/munge /var/lib/munge /var/log/munge
chmod 0400 /etc/munge/munge.key
chmod 0755 /run/munge
pgrep -x munged >/dev/null || runuser -u munge -- /usr/sbin/munged
pgrep -x slurmctld >/dev/null || /usr/sbin/slurmctld
pgrep -x slurmd >/dev/null || /usr/sbin/slurmd

for _ in $(seq 60); do
  if sinfo -h -o %T 2>/dev/null | grep -qE '^(idle|mixed|allocated)'; then
    exit 0
  fi
  scontrol update NodeName="$host" State=RESUME >/dev/null 2>&1 || true
  sleep 1
done
echo "slurm-local.sh: the node did not come up; see /var/log/slurm/slurmctld.log and slurmd.log" >&2
sinfo >&2 || true
exit 1
