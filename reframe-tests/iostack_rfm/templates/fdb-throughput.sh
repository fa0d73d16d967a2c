#!/bin/bash
# The measurement of checks/fdb_throughput.py: FDB archiving against a raw write of the same
# bytes with the same durability, in the same directory, with 1 or more concurrent writers.
#
#   fdb-throughput.sh IO_DIR DURABILITY REPEATS "WRITER COUNTS" NSTEPS MEMBERS \
#                     FIELDS_PER_FLUSH FIELD_BYTES AUDIT_STEPS PROFILE_STEPS -- FDB_WRITER ARGS...
#
# FDB_WRITER ARGS is one writer's command; %W (its index), %N (the number of writers) and %S
# (the steps) are replaced. The workload is MEMBERS x NSTEPS (member, step) pairs, each
# FIELDS_PER_FLUSH fields followed by a flush; writer W of N archives every N-th pair from
# the W-th, and its raw counterpart (a fio job of its own) writes as many bytes, a field per
# write.
# DURABILITY (FDB's side is set by the check's environment):
#   sync-flush  FDB fdatasyncs its data at every flush; fio fdatasyncs after every
#               FIELDS_PER_FLUSH writes (the last one an fsync, --end_fsync)
#   sync-end, async-end   neither side syncs its data; both end with `sync -f IO_DIR`
#               (syncfs), whose time is each side's last
# AUDIT_STEPS > 0: first, one pass with that many steps and the largest writer count under
# strace (fdatasync, fsync, sync, syncfs), untimed: audit-{raw,fdb}*.strace.
# PROFILE_STEPS > 0: then, untimed, one FDB writer at PROFILE_STEPS and at twice as many
# steps S, once under `strace -f -c` (system calls by name: profile-S.strace) and once under
# python3's getrusage (page faults, context switches: profile-S.rusage), the writer's
# statistics in profile-S-{syscalls,rusage}.out: the difference between the two sizes is what
# a field costs, start-up left out. Then, REPEATS times, for each writer count N, the raw
# write, then FDB into a fresh root:
#   raw-N-R.json (fio), raw-N-R.time, fdb-N-R-W.out (the writer's statistics),
#   fdb-N-R-W.time (its real/user/sys seconds), {raw,fdb}-N-R-sync.time (syncfs)
# The FDB root of the last pass is left for the check to read back.
set -u
io=$1 durability=$2 repeats=$3 counts=$4 nsteps=$5 members=$6 per_flush=$7 field=$8 audit=$9
profile=${10}
shift 11
writer=("$@")
TIMEFORMAT='real=%3R user=%3U sys=%3S'
TRACE=(strace -f -qq -y -e 'trace=fdatasync,fsync,sync,syncfs')

case $durability in
    sync-flush) raw_sync=(--fdatasync="$per_flush" --end_fsync=1) ;;
    sync-end|async-end) raw_sync=() ;;
    *) echo "fdb-throughput.sh: unknown durability '$durability'" >&2; exit 2 ;;
esac
if [ $(( audit + profile )) -gt 0 ] && ! command -v strace > /dev/null; then
    echo "fdb-throughput.sh: the sync audit and the profile need strace, which is not on PATH" >&2
    exit 2
fi

# (member, step) pairs of writer $1 of $2, with $3 steps
pairs_of() { echo $(( (members * $3 - $1 + $2 - 1) / $2 )); }

# run PREFIX MODE COMMAND...: MODE 1 under strace (the syncs) into PREFIX.strace, 0 timed
# into PREFIX.time; syscalls: strace -c into PREFIX.strace; rusage: PREFIX.rusage
run() {
    local prefix=$1 mode=$2
    shift 2
    case $mode in
        1) "${TRACE[@]}" -o "$prefix.strace" "$@" ;;
        syscalls) strace -f -c -o "$prefix.strace" "$@" ;;
        rusage) python3 -c 'import resource, subprocess, sys
rc = subprocess.call(sys.argv[2:])
u = resource.getrusage(resource.RUSAGE_CHILDREN)
with open(sys.argv[1], "w") as f:
    print(f"minflt={u.ru_minflt} majflt={u.ru_majflt} nvcsw={u.ru_nvcsw} nivcsw={u.ru_nivcsw}", file=f)
sys.exit(rc)' "$prefix.rusage" "$@" ;;
        *) { time "$@"; } 2> "$prefix.time" ;;
    esac
}

# end_sync PREFIX MODE: the end variants' syncfs of the I/O directory's file system
end_sync() {
    [ "$durability" = sync-flush ] || [ "$2" = syscalls ] || [ "$2" = rusage ] ||
        run "$1-sync" "$2" sync -f "$io"
}

# raw PREFIX N STEPS MODE: N fio jobs at once, job W writing writer W's bytes
raw() {
    local prefix=$1 n=$2 steps=$3 mode=$4 jobs=() w
    for ((w = 0; w < n; w++)); do
        jobs+=(--name="raw-w$w" --size=$(( $(pairs_of "$w" "$n" "$steps") * per_flush * field )))
    done
    run "$prefix" "$mode" fio --output-format=json --output="$prefix.json" --directory="$io" \
        --ioengine=psync --rw=write --bs="$field" "${raw_sync[@]}" "${jobs[@]}"
    echo "fio writers=$n rc=$?"
    end_sync "$prefix" "$mode"
    rm -f "$io"/raw-w*
}

# fdb PREFIX N STEPS MODE: N writers at once into a fresh FDB root
fdb() {
    local prefix=$1 n=$2 steps=$3 mode=$4 pids=() w args
    rm -rf "$io/fdb-root"
    python3 -m iostack.deployment.fdbconfig --root "$io/fdb-root" --out fdb-config.yaml > /dev/null
    for ((w = 0; w < n; w++)); do
        args=("${writer[@]//%W/$w}")
        args=("${args[@]//%N/$n}")
        args=("${args[@]//%S/$steps}")
        run "$prefix-$w" "$mode" "${args[@]}" > "$prefix-$w.out" &
        pids+=($!)
    done
    for w in "${!pids[@]}"; do
        wait "${pids[$w]}"
        echo "fdb writer=$w writers=$n rc=$?"
    done
    end_sync "$prefix" "$mode"
}

mkdir -p "$io"
read -ra counts <<< "$counts"
echo "durability=$durability field bytes=$field steps=$nsteps members=$members" \
     "fields per flush=$per_flush writer counts=${counts[*]}"
if [ "$audit" -gt 0 ]; then
    raw audit-raw "${counts[-1]}" "$audit" 1
    fdb audit-fdb "${counts[-1]}" "$audit" 1
    echo "sync audit done writers=${counts[-1]} steps=$audit"
fi
if [ "$profile" -gt 0 ]; then
    for steps in "$profile" $(( 2 * profile )); do
        for mode in syscalls rusage; do
            fdb "profile-$steps-$mode" 1 "$steps" "$mode"
            mv "profile-$steps-$mode-0.out" "profile-$steps-$mode.out"
            mv "profile-$steps-$mode-0.${mode/syscalls/strace}" "profile-$steps.${mode/syscalls/strace}"
        done
    done
    echo "profile done steps=$profile,$(( 2 * profile ))"
fi
for r in $(seq 1 "$repeats"); do
    for n in "${counts[@]}"; do
        raw "raw-$n-$r" "$n" "$nsteps" 0
        fdb "fdb-$n-$r" "$n" "$nsteps" 0
    done
done
