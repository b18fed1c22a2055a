# Starts a server detached ON THE BOX and lets it report its own identity (specdebug launch).
# Run as: sh -c "$(cat launch.sh)" sh LOG CWD REPORT env K=V... ARGV...   (positional parameters only)
# `~` in LOG or CWD is expanded here, on the box.  Prints `size N` (the log's size before this run)
# and `log PATH`; the server side (REPORT: launch_report.sh, run after setsid) adds its `server` line
# on fd 3.  Exit 3: cannot create the log file; 4: cannot cd to CWD; 5: the log's folder is not this
# login's own and private, or the log is a symlink or not a regular file (a line on stderr says which).
# Why: on a shared box another user could plant the folder or a symlink in it and have the server's
# output appended to a file of ours, or forge the log we read.  The folder is opened first (cd), and
# checked: ours, writable by nobody else; then nobody else can swap the name we append to.
log=$1; dir=$2; report=$3; shift 3
case $log in "~") log=$HOME;; "~/"*) log=$HOME/${log#"~/"};; esac
case $log in /*) ;; *) log=$PWD/$log;; esac
if [ -n "$dir" ]; then
  case $dir in "~") dir=$HOME;; "~/"*) dir=$HOME/${dir#"~/"};; esac
  cd -- "$dir" || exit 4
fi
logdir=$(dirname -- "$log"); base=$(basename -- "$log")
mkdir -p -m 700 -- "$logdir" || exit 3
me=$(id -u)
here=$PWD
# fields of `ls -ln` (mode, links, uid, size), in a function: the server's argv stays in "$@"
lsf() { printf '%s %s %s %s\n' "$1" "$2" "$3" "$5"; }
refuse() { echo "$1" >&2; exit 5; }
# the checks and the open happen inside the folder, so a rename of a folder above cannot swap it
cd -P -- "$logdir" || exit 3
read -r mode _ uid _ <<EOF
$(lsf $(ls -ldn .))
EOF
[ "$uid" = "$me" ] || refuse "log folder $logdir is owned by uid $uid, not by this login (uid $me): refusing to write there"
case $mode in ?????w*|????????w*)
  refuse "log folder $logdir is writable by group or others ($mode): refusing to write there";;
esac
[ -L "$base" ] && refuse "log $log is a symlink: refusing to write through it"
if [ -e "$base" ] && [ ! -f "$base" ]; then refuse "log $log is not a regular file"; fi
exec 4>>"$base" || exit 3
read -r mode links uid size <<EOF
$(lsf $(ls -ln -- "$base"))
EOF
[ "$uid" = "$me" ] || refuse "log $log is owned by uid $uid, not by this login (uid $me)"
[ "$links" = 1 ] || refuse "log $log has $links hard links: refusing to write to it"
cd -- "$here" || exit 4
printf 'size %s\nlog %s\n' "$size" "$log"
# The launch's id (a K=V word of the `env` prefix) goes into the server side's environment too, so
# its /proc environ carries it from its first exec, before `env` has run the server: a `status` right
# after the launch then proves the group as well (procctl.judge's token check), not "unproven".
for a; do
  case $a in env) ;; SPECDEBUG_LAUNCH_ID=*) export "$a"; break;; *=*) ;; *) break;; esac
done
if command -v setsid >/dev/null 2>&1; then
  set -- setsid sh -c "$report" sh "$@"
else
  set -- python3 -c 'import os, sys; os.setsid(); os.execvp(sys.argv[1], sys.argv[1:])' sh -c "$report" sh "$@"
fi
"$@" 3>&1 </dev/null >&4 2>&1 4>&- &
