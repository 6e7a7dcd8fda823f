#!/bin/sh
# Stands in for mpirun on PATH: its first $FLAKY_FAILS starts fail as Open
# MPI's can on a loaded host (an Open MPI line on stderr, exit 1, no rank
# started); later ones run the real mpirun ($REAL_MPIRUN). $FLAKY_COUNT
# names the file that counts the starts.
n=$(cat "$FLAKY_COUNT" 2>/dev/null || echo 0)
echo $((n + 1)) > "$FLAKY_COUNT"
if [ "$n" -lt "$FLAKY_FAILS" ]; then
  echo "[flakyhost:4242] ORTE_ERROR_LOG: Timeout in file base/plm_base_launch_support.c at line 1" >&2
  exit 1
fi
exec "$REAL_MPIRUN" "$@"
