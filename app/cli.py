"""The `distdeck` command line."""

from typing import Annotated

import typer

cli = typer.Typer(no_args_is_help=True, add_completion=False, help="distdeck: see distributed training, for real.")


@cli.callback()
def _commands() -> None:
    """Keeps `distdeck serve` a subcommand: typer runs a lone command as the root otherwise."""


@cli.command()
def serve(
    host: Annotated[str, typer.Option(help="Interface to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="Port to listen on.")] = 8000,
    reload: Annotated[bool, typer.Option(help="Reload on code changes (development).")] = False,
) -> None:
    """Serve the deck at http://HOST:PORT."""
    import uvicorn

    uvicorn.run("app.main:create_app", factory=True, host=host, port=port, reload=reload)


def main() -> None:
    cli()
