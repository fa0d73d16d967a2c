#!/bin/bash
# The measurement of checks/fdb_throughput.py, run under the partition's launcher:
#   fdb-throughput.sh IO_DIR REPEATS NFIELDS TEMPLATE HAMMER_ARGS...
# REPEATS times: the raw sequential write of the file system (fio, as many bytes as FDB
# will archive, a field per write, fsync at the end), then fdb-hammer archiving the fields
# into a fresh FDB in the same directory. Then the fields are listed and read back once.
# Outputs: fio-write-N.json, hammer-write-N.out, hammer-read.out, "fields listed=" on stdout.
set -u
io=$1 repeats=$2 nfields=$3 template=$4
shift 4

# One I/O measurement per node at a time: ReFrame runs several jobs at once on a node
# (and CI may run other tests), and two writers would each measure half a disk.
exec 9>"${TMPDIR:-/tmp}/iostack-io-measurement.lock"
flock 9

field=$(stat -c %s "$template")
bytes=$((field * nfields))
echo "raw write bytes=$bytes field bytes=$field fields=$nfields"
mkdir -p "$io"
for i in $(seq 1 "$repeats"); do
    rm -rf "$io/fdb-root"
    python3 -m iostack.fdbconfig --root "$io/fdb-root" --out fdb-config.yaml > /dev/null
    fio --name=raw-write --filename="$io/raw-write.dat" --rw=write --bs="$field" \
        --size="$bytes" --ioengine=psync --end_fsync=1 --output-format=json \
        --output="fio-write-$i.json"
    echo "fio rc=$?"
    rm -f "$io/raw-write.dat"
    fdb-hammer --statistics "$@" "$template" > "hammer-write-$i.out"
    echo "fdb-hammer write rc=$?"
done
echo "fields listed=$(fdb-list --porcelain class=od,expver=0001 | grep -c '^{')"
fdb-hammer --read --statistics "$@" "$template" > hammer-read.out
echo "fdb-hammer read rc=$?"
rm -rf "$io/fdb-root"
