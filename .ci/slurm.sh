#!/usr/bin/env bash
# A real single-node SLURM cluster on localhost, and the bandits study run through Snakemake's SLURM
# executor on it (every job is an sbatch submission; the rule runs under srun inside the job).
# Then a bad resource request (more memory than the node has) must fail fast with SLURM's own error.
#
#   bash .ci/slurm.sh            # needs root (apt-get, daemons); Debian 12; ~2-4 min
#
# Env knobs: SLURM_CI_DIR (state, default .slurm-ci/), SLURM_CI_TIMEOUT (s, main run),
# SLURM_CI_TARGETS, SLURM_CI_CONFIGS, SLURM_CI_BAD_RULE, SLURM_CI_GROUPS/_GROUP_COMPONENTS,
# SLURM_CI_SMK_ARGS, SLURM_CTLD_PORT/SLURMD_PORT. Exits non-zero on any failure.
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
P=${SLURM_CI_DIR:-$REPO/.slurm-ci}
TIMEOUT=${SLURM_CI_TIMEOUT:-900}
TARGETS=${SLURM_CI_TARGETS:-results/bandits/summary.md}
BAD_RULE=${SLURM_CI_BAD_RULE:-bandits_aggregate}   # summaries/figures/reports are local rules: no sbatch
CONFIGS=${SLURM_CI_CONFIGS:-config/test.yaml profiles/ci-slurm/bandits-small.yaml}
CTLD_PORT=${SLURM_CTLD_PORT:-6817}
SLURMD_PORT=${SLURMD_PORT:-6818}
CONF=/etc/slurm/slurm.conf          # jobstep strips SLURM_CONF, so the inner srun needs the default path
T0=$(date +%s)
log() { printf '[slurm-ci %3ss] %s\n' "$(( $(date +%s) - T0 ))" "$*"; }
die() { log "FAIL: $*"; exit 1; }

# ---- 1. packages ---------------------------------------------------------------------------------
missing=0
for b in slurmctld slurmd sbatch munged; do command -v "$b" >/dev/null || [ -x "/usr/sbin/$b" ] || missing=1; done
if [ "$missing" = 1 ]; then
  log "installing slurmctld slurmd slurm-client munge"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends slurmctld slurmd slurm-client munge >/dev/null
fi
log "slurm $(sinfo --version 2>/dev/null | awk '{print $2}')"

# ---- 2. daemons ----------------------------------------------------------------------------------
stop_daemons() {
  local f pid
  if [ -s "$P/run/slurmctld.pid" ] && kill -0 "$(cat "$P/run/slurmctld.pid")" 2>/dev/null; then
    scancel --user="$(id -un)" 2>/dev/null || true          # no job step may outlive the cluster
    for _ in $(seq 1 60); do [ -z "$(squeue -h -o %i -t PD,R,CG 2>/dev/null)" ] && break; sleep 0.25; done
  fi
  for f in "$P/run/slurmd.pid" "$P/run/slurmctld.pid" "$P/run/munged.pid"; do
    [ -s "$f" ] || continue
    pid=$(cat "$f")
    if kill "$pid" 2>/dev/null; then
      for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null || true
    fi
    rm -f "$f"
  done
}
stop_daemons                                                     # leftovers of an earlier run
trap 'rc=$?; stop_daemons; [ $rc = 0 ] || { log "logs in $P/log"; tail -n 20 "$P"/log/slurm*.log 2>/dev/null || true; }; exit $rc' EXIT
rm -rf "$P"; mkdir -p "$P"/{spool/ctld,spool/d,log,run,work}

mkdir -p /run/munge /var/lib/munge /var/log/munge /etc/munge
if [ ! -s /etc/munge/munge.key ]; then
  dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
fi
chmod 600 /etc/munge/munge.key
/usr/sbin/munged --force --pid-file="$P/run/munged.pid" --log-file="$P/log/munged.log"
munge -n | unmunge >/dev/null || die "munge does not work"

# CPUs are oversubscribed (config_overrides): a SLURM job here is mostly Snakemake start-up and
# waiting, so 8 slots on a 2-core runner finish the small jobs ~3x sooner than 2 slots would.
CPUS=${SLURM_CI_CPUS:-$(( $(nproc) > 8 ? $(nproc) : 8 ))}
NODE_MEM=$(slurmd -C 2>/dev/null | sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p')
MEM=$(( NODE_MEM - 1024 > 8000 ? 8000 : NODE_MEM - 1024 ))      # what SLURM may hand out (MB)
mkdir -p /etc/slurm
[ -f "$CONF" ] && ! grep -q '^# paperflow-ci' "$CONF" && cp "$CONF" "$CONF.bak.$(date +%s)"
cat > "$CONF" <<CONF
# paperflow-ci: single-node cluster written by .ci/slurm.sh
ClusterName=paperflowci
SlurmctldHost=localhost
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
AuthType=auth/munge
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$P/spool/ctld
SlurmdSpoolDir=$P/spool/d
SlurmctldPidFile=$P/run/slurmctld.pid
SlurmdPidFile=$P/run/slurmd.pid
SlurmctldLogFile=$P/log/slurmctld.log
SlurmdLogFile=$P/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU_Memory
DefMemPerCPU=500
ReturnToService=2
MpiDefault=none
SwitchType=switch/none
SlurmdParameters=config_overrides
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$P/log/jobcomp.txt
# squeue status checks need finished jobs to stay visible >= 3 x the first status-check delay
MinJobAge=300
NodeName=localhost NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=$MEM State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
/usr/sbin/slurmctld -c
/usr/sbin/slurmd -N localhost
for _ in $(seq 1 120); do sinfo -h -o %T 2>/dev/null | grep -qx idle && break; sleep 0.25; done
sinfo -h -o %T | grep -qx idle || die "node never became idle: $(sinfo 2>&1)"
log "cluster up: $(sinfo -h -o '%P %a %D %T %c CPUs %m MB')"

# ---- 3. the bandits study on SLURM ---------------------------------------------------------------
# A private copy of the tree (tracked + untracked, not ignored), so results/ of the checkout is untouched.
W="$P/work"
if git -C "$REPO" rev-parse --git-dir >/dev/null 2>&1; then
  (cd "$REPO" && git ls-files -z -co --exclude-standard | tar --null --ignore-failed-read -T - -cf - 2>/dev/null) | tar -xf - -C "$W"
else
  tar -C "$REPO" --exclude=./.venv --exclude=./.slurm-ci --exclude=./.snakemake --exclude=./results -cf - . | tar -xf - -C "$W"
fi
[ -d "$REPO/.venv" ] && . "$REPO/.venv/bin/activate"
export OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 PAPERFLOW_PROGRESS=0
cd "$W"
PROFILES=(--profile slurm --profile profiles/ci-slurm)
# The site profile groups the simulations (slurm/config.yaml: groups, group-components); override with
# e.g. SLURM_CI_GROUPS=bandits_simulate=sim SLURM_CI_GROUP_COMPONENTS=sim=8.
GROUP_ARGS=()
[ -n "${SLURM_CI_GROUPS-}" ] && GROUP_ARGS=(--groups ${SLURM_CI_GROUPS} --group-components ${SLURM_CI_GROUP_COMPONENTS:-})
log "snakemake $TARGETS ${PROFILES[*]} ${GROUP_ARGS[*]} --configfile $CONFIGS"
set +e
T_RUN=$(date +%s)
timeout -s TERM -k 10 "$TIMEOUT" snakemake $TARGETS "${PROFILES[@]}" "${GROUP_ARGS[@]}" ${SLURM_CI_SMK_ARGS-} --configfile $CONFIGS \
  > "$P/log/snakemake.log" 2>&1
rc=$?
SECONDS_RUN=$(( $(date +%s) - T_RUN ))
set -e
grep -E "sbatch call|submitted with SLURM jobid|Finished jobid|steps \(100%\) done|Error|error" "$P/log/snakemake.log" | sed 's/^/  | /' | cut -c1-220 || true
[ $rc = 0 ] || { tail -n 60 "$P/log/snakemake.log"; die "snakemake on SLURM exited $rc (124/137: timeout)"; }
n_sub=$(grep -c "submitted with SLURM jobid" "$P/log/snakemake.log" || true)
[ "$n_sub" -ge 1 ] || die "no job went through sbatch"
for t in $TARGETS; do [ -s "$t" ] || die "missing output $t"; done
n_done=$(grep -c "JobState=COMPLETED" "$P/log/jobcomp.txt" || true)
[ "$n_done" -ge "$n_sub" ] || die "SLURM recorded $n_done COMPLETED jobs for $n_sub submissions"
grep -q "JobState=FAILED" "$P/log/jobcomp.txt" && die "a SLURM job FAILED: $(grep FAILED "$P/log/jobcomp.txt")"
log "main run: ${SECONDS_RUN}s wall (load average $(cut -d' ' -f1-3 /proc/loadavg))"
log "OK: $n_sub jobs submitted with sbatch, $n_done COMPLETED in SLURM's job log; outputs: $TARGETS"

# ---- 4. a bad resource request must fail fast with SLURM's own error, not hang -------------------
BIG=$(( MEM * 10 ))
log "bad request: $BAD_RULE with mem_mb=$BIG (node has $MEM MB)"
set +e
timeout -s TERM -k 10 120 snakemake $TARGETS "${PROFILES[@]}" --retries 0 --forcerun "$BAD_RULE" \
  --set-resources "$BAD_RULE:mem_mb=$BIG" --configfile $CONFIGS > "$P/log/snakemake-bad.log" 2>&1
rc=$?
set -e
grep -E "sbatch failed|sbatch: error" "$P/log/snakemake-bad.log" | sed 's/^/  | /' | cut -c1-220 || true
[ $rc != 0 ] || die "snakemake accepted a job asking for $BIG MB on a $MEM MB node"
[ $rc != 124 ] && [ $rc != 137 ] || die "snakemake hung on an impossible request (timeout)"
grep -q "Memory specification can not be satisfied" "$P/log/snakemake-bad.log" \
  || { tail -n 40 "$P/log/snakemake-bad.log"; die "SLURM's error was not surfaced in the Snakemake log"; }
log "OK: impossible memory request rejected by sbatch, error surfaced, snakemake exit $rc"
log "PASS"
