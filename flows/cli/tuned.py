"""`kernelsweep tuned ...`: the tuned store beside the results (kernelsweep.tuned), listed and exported
as one file a model's code loads with `kernelsweep.tuned.best`."""

from __future__ import annotations

from pathlib import Path

import click

from kernelsweep.flows.cli.output import console, out

RESULTS_OPTION = click.option(
    "--results", "results_uri", default="results", show_default=True, help="Results folder or s3://."
)


@click.group()
def tuned() -> None:
    """The best configuration per kernel, shape, dtype, platform, LNC and SDK (docs/tuning.md)."""


@tuned.command()
@RESULTS_OPTION
def show(results_uri: str) -> None:
    """One line per stored best: its key, tunables, the runner-up's verdict, when and where confirmed."""
    from kernelsweep.tuned.store import TunedStore

    store = TunedStore(results_uri)
    entries = store.entries()
    for e in entries:
        k, b = e["key"], e["best"]
        config = ",".join(f"{n}={v}" for n, v in b["tunables"].items())
        verdict = (e.get("gap") or {}).get("verdict", "-")
        when = e["confirmed"]
        out.print(
            f"{k['kernel']} {k['shape']} {k['dtype']} {k['platform']} lnc={k['lnc']} "
            f"compiler={k['sdk'].get('compiler')}: {config} {b['latency_median_us']:.3f} us, runner-up {verdict}; "
            f"confirmed {when['at']} on {when['host']} by {when['by']}",
            highlight=False,
            soft_wrap=True,
        )
    console.print(f"{len(entries)} stored best(s) in {store.uri}", highlight=False, soft_wrap=True)


@tuned.command(name="export")
@RESULTS_OPTION
@click.argument("path", type=click.Path(dir_okay=False, path_type=Path))
def export_file(results_uri: str, path: Path) -> None:
    """Write every stored best to PATH (TOML for a .toml name, else JSON), with the kernels' defaults."""
    from kernelsweep.tuned.export import write
    from kernelsweep.tuned.store import TunedStore

    store = TunedStore(results_uri)
    written = write(store.entries(), store.uri, path)
    console.print(f"{written} stored best(s) from {store.uri}: {path}", highlight=False, soft_wrap=True)


@tuned.command()
@click.argument("spec_path", metavar="SPEC", type=click.Path(exists=True, dir_okay=False))
@click.option("--toolchain", type=click.Choice(["sim", "neuron"]), help="Override the spec's toolchain.")
@click.option("--results", help="Override the spec's results location (its tuned store is re-checked).")
@click.option("--artifacts", help="Override the spec's artifact store.")
def recheck(spec_path: str, toolchain: str | None, results: str | None, artifacts: str | None) -> None:
    """Measure each stored best of SPEC's searched kernels against its runner-up on this host's
    toolchain; re-tune (warm-started, SPEC's search settings) only the keys whose verdict flips."""
    import os

    from kernelsweep.flows.cli.run import QUIET_PREFECT, load_expansion

    spec, _ = load_expansion(spec_path, toolchain=toolchain, results=results, artifacts=artifacts)
    for key, value in QUIET_PREFECT.items():
        os.environ.setdefault(key, value)
    from kernelsweep.flows import embedded

    api = embedded.start_api()  # boots while the flow's modules import
    from kernelsweep.flows.recheck import recheck_flow

    outcome = embedded.run_flow(lambda: recheck_flow(spec), on_row=lambda _: None, api=api)
    for line in outcome.lines():
        out.print(line, highlight=False, soft_wrap=True)
    for line in outcome.skipped:
        console.print(f"skipped: {line}", highlight=False, soft_wrap=True)
    console.print(outcome.summary(), highlight=False)
