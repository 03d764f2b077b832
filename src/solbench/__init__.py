"""solbench: GPU kernels against the hardware's speed of light, judged by a trusted evaluator."""


def version() -> str:
    """The installed solbench's version ("?" where it is run from a tree that was never installed)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("solbench")
    except PackageNotFoundError:
        return "?"
