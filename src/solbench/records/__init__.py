"""The records under everything: what an evaluation concludes (``verdict``: verdicts, per-workload results, the
evaluation), how a result scores (``scoring``) and every reason code and warning a result can carry
(``reasons``). They import nothing of solbench's, so the evaluator, the results store, the reports, the agent
track and the experiments all read the same records without reaching into one another."""
