# Holds a Slurm job step for as long as the server it launched lives (launch on slurm:JOB:NODE).
# Run as a step's task: sh -c "$(cat step_hold.sh)" sh LAUNCH_ARGV...   (positional parameters only)
# Runs the launch (launch.sh: it starts the server detached and reports its identity), prints the
# launch's lines, `step JOB.STEP` and `rc N`, then waits until the server's PID is gone (or a
# zombie) and ends, so the step ends with the server.  `scancel JOB.STEP` ends it earlier.
out=$("$@" 2>&1); rc=$?
printf '%s\n' "$out"
printf 'step %s.%s\nrc %s\n' "$SLURM_JOB_ID" "$SLURM_STEP_ID" "$rc"
[ "$rc" -eq 0 ] || exit "$rc"
pid=$(printf '%s\n' "$out" | sed -n 's/^server \([0-9][0-9]*\) .*/\1/p')
[ -n "$pid" ] || exit 125
exec >/dev/null 2>&1 </dev/null
while s=$(cat "/proc/$pid/stat" 2>/dev/null); do
  s=${s##*) }
  [ "${s%% *}" = Z ] && break
  sleep 1
done
