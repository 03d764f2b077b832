"""Options several commands share (their modules import them from here, not from one another)."""

import typer

DbOption = typer.Option("solbench.db", "--db", help="results database (SQLite)")
ProfileOption = typer.Option("one", "--profile-dsl", help="GPU language proof: profile a kernel-language solution's "
                             "call for its own kernels' share on one workload the run's seed picks (one), all, or "
                             "off")
HoldOption = typer.Option(True, "--hold/--no-hold", help="GPU: hold the stream with a spin kernel so samples time "
                          "the device, not the host's launches (--no-hold counts host-bound launch latency)")
