# The server side of launch.sh, ON THE BOX, run after setsid: reads /proc/$$/stat (PID, PGID,
# session, start time), checks that it leads its own group and session, writes that line to fd 3
# (the launcher's stdout, which the client reads), closes fd 3 and execs the server, so the PID,
# the group and the start time stay the server's.
read -r st </proc/$$/stat || { echo noid >&3; exit 125; }
leads() { [ "$1" = "$5" ] && [ "$1" = "$6" ]; }
leads $st || { printf 'notleader %s\n' "$st" >&3; exit 125; }
printf 'server %s\n' "$st" >&3
exec 3>&-
exec "$@"
