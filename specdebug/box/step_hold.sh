# Holds a Slurm job step for as long as the server it launched lives (launch on slurm:JOB:NODE).
# Run as a step's task: sh -c "$(cat step_hold.sh)" sh LAUNCH_ARGV...   (positional parameters only)
# Runs the launch (launch.sh: it starts the server detached and reports its identity), prints the
# launch's lines, `step JOB.STEP` and `rc N`, then waits until the server's PID is gone (or a
# zombie) and ends, so the step ends with the server.  `scancel JOB.STEP` ends it earlier.
#
# And the server ends with its step: it leads its own session and group (setsid), so Slurm's cleanup
# (proctrack/pgid signals the task's group only) never reaches it.  A cancelled job or a time limit
# sends the step SIGTERM (KillWait before SIGKILL): this task traps it; `scancel JOB.STEP` sends
# SIGKILL at once: a sentinel in a session of its own sees this task gone within a second.  Either
# passes TERM to the server's group, gives it HOLD_GRACE_S, then KILLs what is left.  The group is
# signalled only while its leader is the server launched here (the same PID and start time).
HOLD_GRACE_S=3
out=$("$@" 2>&1); rc=$?
printf '%s\n' "$out"
printf 'step %s.%s\nrc %s\n' "$SLURM_JOB_ID" "$SLURM_STEP_ID" "$rc"
[ "$rc" -eq 0 ] || exit "$rc"
pid=$(printf '%s\n' "$out" | sed -n 's/^server \([0-9][0-9]*\) .*/\1/p')
[ -n "$pid" ] || exit 125
exec >/dev/null 2>&1 </dev/null
# shared by this task and its sentinel: `state starttime` of a PID (fields 3 and 22 of its stat,
# counted after `(comm)`, which may hold spaces); a PID still the live process started then; the
# server still ours; ending its group
lib='
stat_of() { s=$(cat "/proc/$1/stat" 2>/dev/null) || return 1; s=${s##*) }; set -- $s; echo "$1 ${20}"; }
same() { set -- $(stat_of "$1") "$2"; [ "$#" = 3 ] && [ "$1" != Z ] && [ "$2" = "$3" ]; }
ours() { same "$pid" "$born"; }
end_server() {
  trap "" TERM INT HUP
  if ours; then
    kill -s TERM -- "-$pid" 2>/dev/null
    n=0
    while [ "$n" -lt $((grace * 10)) ] && ours; do sleep 0.1; n=$((n + 1)); done
    kill -s KILL -- "-$pid" 2>/dev/null  # members left: a group id is not reused while one lives
  fi
  exit 143
}
'
eval "$lib"
grace=$HOLD_GRACE_S
born=$(stat_of "$pid" | cut -d" " -f2)
[ -n "$born" ] || exit 0
me=$(stat_of $$ | cut -d" " -f2)
sentinel="$lib"'
pid=$1; born=$2; hold=$3; hold_born=$4; grace=$5
trap "" HUP INT
while ours; do
  same "$hold" "$hold_born" || end_server
  sleep 1
done'
if command -v setsid >/dev/null 2>&1; then
  setsid sh -c "$sentinel" sh "$pid" "$born" "$$" "$me" "$grace" &
else
  python3 -c 'import os, sys; os.setsid(); os.execvp(sys.argv[1], sys.argv[1:])' \
    sh -c "$sentinel" sh "$pid" "$born" "$$" "$me" "$grace" &
fi
trap end_server TERM INT HUP
while ours; do
  sleep 1 &
  wait $!
done
