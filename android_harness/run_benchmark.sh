#!/system/bin/sh
# deploytool's device-side driver, pushed beside TFLite's benchmark_model to
# /data/local/tmp/deploytool/bin/ and run from a per-run folder. It runs the
# binary with a time limit, measures its peak RSS, and loops over input
# batches on the phone so a whole test set costs one `adb shell`. It never
# writes outside the current folder. Contract: android_harness/README.md.
#
#   sh run_benchmark.sh repeat  N TIMEOUT_S -- BINARY ARGS...
#   sh run_benchmark.sh batches N BATCH_BYTES INPUTS OUTPUTS TIMEOUT_S -- BINARY ARGS...
#
# In `batches` mode ARGS read batch_in.bin and write batch_out.bin (relative
# to the current folder); batch k of INPUTS is copied to batch_in.bin and each
# batch_out.bin is appended to OUTPUTS. A model of several inputs gives
# comma-separated INPUTS and BATCH_BYTES (one per input, in the model's order):
# batch k of the j-th goes to batch_in_<j>.bin. Exit status: the binary's, 124 when a
# run passed TIMEOUT_S, 2 for a usage error.

set -u

usage() { echo "usage: run_benchmark.sh repeat|batches ... -- BINARY ARGS..." >&2; exit 2; }

# toybox `time -v` reports the child's peak RSS ("Max RSS (KiB): N") from
# wait4's rusage; where it is missing, poll VmHWM while the binary runs.
if toybox time -v true >/dev/null 2>&1; then HAVE_TIME_V=1; else HAVE_TIME_V=0; fi

run_one() {  # run_one TIMEOUT_S BINARY ARGS...  (output on stdout/stderr)
    t=$1; shift
    if [ "$HAVE_TIME_V" = 1 ]; then
        # timeout signals only its own child, so it must be the binary's parent.
        toybox time -v timeout -k 2 "$t" "$@"
        return $?
    fi
    "$@" &
    pid=$!
    hwm=0
    start=$(date +%s)
    while :; do
        st=$(sed -n 's/^State:[[:space:]]*\(.\).*/\1/p' "/proc/$pid/status" 2>/dev/null)
        [ -z "$st" ] || [ "$st" = Z ] && break
        v=$(sed -n 's/^VmHWM:[[:space:]]*\([0-9]*\).*/\1/p' "/proc/$pid/status" 2>/dev/null)
        [ -n "$v" ] && hwm=$v
        if [ $(( $(date +%s) - start )) -ge "$t" ]; then
            kill -9 "$pid" 2>/dev/null
            wait "$pid" 2>/dev/null
            echo "VmHWM (KiB): $hwm" >&2
            return 124
        fi
        sleep 0.05
    done
    wait "$pid"
    rc=$?
    echo "VmHWM (KiB): $hwm" >&2
    return $rc
}

[ $# -ge 1 ] || usage
mode=$1; shift
case "$mode" in
repeat)
    [ $# -ge 4 ] && [ "$3" = "--" ] || usage
    n=$1; t=$2; shift 3
    i=0
    while [ "$i" -lt "$n" ]; do
        echo "=== deploytool run $i ==="
        run_one "$t" "$@" 2>&1
        rc=$?
        [ "$rc" -eq 0 ] || exit "$rc"
        i=$((i + 1))
    done
    exit 0
    ;;
batches)
    [ $# -ge 7 ] && [ "$6" = "--" ] || usage
    n=$1; bb=$2; inputs=$3; outputs=$4; t=$5; shift 6
    : > "$outputs" || exit 2
    i=0
    while [ "$i" -lt "$n" ]; do
        # one INPUTS file (and BATCH_BYTES) per model input, comma-separated: batch k of each goes to
        # batch_in.bin, or batch_in_<j>.bin when there are several
        rest_in=$inputs; rest_bb=$bb; j=0
        while [ -n "$rest_in" ]; do
            f=${rest_in%%,*}; s=${rest_bb%%,*}
            if [ "$rest_in" = "$f" ]; then rest_in=""; else rest_in=${rest_in#*,}; fi
            if [ "$rest_bb" = "$s" ]; then rest_bb=""; else rest_bb=${rest_bb#*,}; fi
            case "$inputs" in *,*) dst="batch_in_$j.bin" ;; *) dst=batch_in.bin ;; esac
            dd if="$f" of="$dst" bs="$s" skip="$i" count=1 2>/dev/null || { echo "run_benchmark.sh: cannot read batch $i of $f" >&2; exit 2; }
            j=$((j + 1))
        done
        rm -f batch_out.bin
        run_one "$t" "$@" > batch.log 2>&1
        rc=$?
        if [ "$rc" -ne 0 ]; then
            echo "=== deploytool batch $i failed ==="
            cat batch.log
            exit "$rc"
        fi
        cat batch_out.bin >> "$outputs" || { echo "run_benchmark.sh: batch $i wrote no batch_out.bin" >&2; exit 2; }
        i=$((i + 1))
    done
    echo "=== deploytool batch $((n - 1)) ==="
    cat batch.log
    exit 0
    ;;
*)
    usage
    ;;
esac
