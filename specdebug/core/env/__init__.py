"""Did the environment reach the workers?  Per worker PID, per variable, with proof.

Why this is not just `cat /proc/PID/environ`: SGLang and vLLM workers call setproctitle, which
overwrites the memory /proc/PID/environ shows (it reads as NULs) unless SPT_NOENV was set at
launch.  So each worker gets an `environ_state`, and when its environ cannot be read the answer
comes from other evidence: NCCL's own `NAME set by environment to VALUE` lines in the server log
(NCCL_DEBUG=INFO; each names the PID that read the variable) and the launcher's environ (which the
workers inherit, except for what the server overwrites on purpose).

Exit-code semantics (documented for the headless verb):
  * `ok` only from direct proof for that PID: its own environ, or an NCCL log line from that PID.
  * a value seen only in the launcher's environ is inference, not proof: `unverifiable`.
  * exit 0 when every expected variable is `ok` on every worker (and there is at least one worker);
    exit 1 otherwise, with one reason per problem (clobbered/denied/gone environ, missing, different).
Secrets: values whose names look secret are masked in every model this module returns (unless the
caller asks for `show_secrets`); comparisons are done before masking, so `different` still shows.

Modules: model (query, verdicts, report), proc (parsing /proc files), report (the pure check),
probe (the reads on the box), events (the typed stream).
"""
