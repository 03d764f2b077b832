"""The host's scheduler: a queue of evaluations in the results database, one slot per device evaluating them,
and the executors that run slots (processes on this host, or Ray actors across hosts). docs/SERVICE.md."""
