"""``solbench serve``: the evaluation service (FastAPI), its API tokens and its metrics. docs/SERVICE.md."""
