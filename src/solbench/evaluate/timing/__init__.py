"""Where a kernel time is measured: the mechanics of a timing round, CUPTI's kernel records, the stopping rule, the
trusted side's cross-checks of a candidate's rounds, and the audit that confirms a time with a clock the candidate
cannot write."""
