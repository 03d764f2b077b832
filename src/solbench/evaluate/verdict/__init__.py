"""Where a verdict is made: the judging of one workload in the trusted worker, by named stages; the outputs judged
against the reference; time limits; and the runner's decision from the worker's result."""
