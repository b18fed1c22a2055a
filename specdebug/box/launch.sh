# Starts a server detached ON THE BOX and lets it report its own identity (specdebug launch).
# Run as: sh -c "$(cat launch.sh)" sh LOG CWD REPORT env K=V... ARGV...   (positional parameters only)
# `~` in LOG or CWD is expanded here, on the box.  Prints `size N` (the log's size before this run)
# and `log PATH`; the server side (REPORT: launch_report.sh, run after setsid) adds its `server` line
# on fd 3.  Exit 3: cannot create the log file; 4: cannot cd to CWD.
log=$1; dir=$2; report=$3; shift 3
case $log in "~") log=$HOME;; "~/"*) log=$HOME/${log#"~/"};; esac
case $log in /*) ;; *) log=$PWD/$log;; esac
if [ -n "$dir" ]; then
  case $dir in "~") dir=$HOME;; "~/"*) dir=$HOME/${dir#"~/"};; esac
  cd -- "$dir" || exit 4
fi
mkdir -p -- "$(dirname -- "$log")" || exit 3
: >>"$log" || exit 3
size=$(wc -c <"$log")
printf 'size %s\nlog %s\n' "$size" "$log"
if command -v setsid >/dev/null 2>&1; then
  set -- setsid sh -c "$report" sh "$@"
else
  set -- python3 -c 'import os, sys; os.setsid(); os.execvp(sys.argv[1], sys.argv[1:])' sh -c "$report" sh "$@"
fi
"$@" 3>&1 </dev/null >>"$log" 2>&1 &
