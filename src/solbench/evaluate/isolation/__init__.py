"""Where a candidate is isolated: its sandboxed process (namespaces, a sealed filesystem, rlimits, a system-call
filter), the zygote it is forked from, and what the trusted side reads about it from outside."""
