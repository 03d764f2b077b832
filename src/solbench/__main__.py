"""``python -m solbench``: the command line (solbench.cli)."""

from solbench.cli import main

if __name__ == "__main__":
    main()
