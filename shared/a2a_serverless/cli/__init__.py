"""`a2a-serverless`: the command of the package (pyproject [project.scripts]).

Subcommands: `dev` (local stack), `invoke` (one function on one event), `new` (scaffold a
project), `keys`, `smoke`, `doctor` (operate a deployed agent). Their modules are imported
only when run, so `--help` is fast. Dev-only: not in the Lambda layer.
"""

from __future__ import annotations

import argparse
import sys


def parser() -> argparse.ArgumentParser:
    from a2a_serverless.local.__main__ import add_param_argument, add_stack_arguments

    top = argparse.ArgumentParser(
        prog="a2a-serverless",
        description="An A2A 1.0 agent on AWS serverless: scaffold, serve locally, invoke.",
    )
    commands = top.add_subparsers(dest="command", required=True, metavar="COMMAND")

    dev = commands.add_parser(
        "dev",
        help="serve the local stack (moto, no Docker) for a flow of the current folder",
        description="Serve the stack of ./template.yaml (else the packaged one) locally.",
    )
    add_stack_arguments(dev)
    dev.add_argument("--template", help="the template.yaml to serve (default: ./template.yaml)")
    dev.add_argument(
        "--reload", action="store_true", help="restart when a .py file under this folder changes"
    )

    invoke = commands.add_parser(
        "invoke",
        help="run one function of the template on an event (no Docker), print its response",
        description=(
            "Run FUNCTION (a logical id of the template, e.g. SendMessageFunction) on the "
            "event in EVENT.json against a fresh in-process local stack; print the response "
            "as JSON. Exits 1 when the handler raises."
        ),
    )
    invoke.add_argument("function", metavar="FUNCTION")
    invoke.add_argument("event", metavar="EVENT.json", help="the event file ('-': stdin)")
    invoke.add_argument("--flow", help="module:attribute of the flow (default: the template's)")
    add_param_argument(invoke)
    invoke.add_argument("--template", help="the template.yaml (default: ./template.yaml)")
    invoke.add_argument(
        "--url",
        help="run it inside the `a2a-serverless dev` stack serving there (its tasks, keys, "
        "settings), e.g. http://127.0.0.1:8000, instead of a fresh stack",
    )

    new = commands.add_parser(
        "new",
        help="scaffold an agent project (flow, template.yaml, samconfig.toml, test, README)",
    )
    new.add_argument("directory", metavar="DIR", help="where to create it (new or empty)")
    new.add_argument("--name", help="the agent's Python package name (default: from DIR)")

    import a2a_serverless.cli.doctor as doctor
    import a2a_serverless.cli.keys as keys
    import a2a_serverless.cli.smoke as smoke

    keys_parser = commands.add_parser(
        "keys",
        help="create, list, revoke API keys of a deployed (--stack-name) or local (--url) stack",
        description=keys.__doc__,
        epilog=keys.EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    keys.add_arguments(keys_parser)
    smoke_parser = commands.add_parser(
        "smoke",
        help="check a deployed (or local) agent end to end: PASS/FAIL/SKIP per check",
        description=smoke.DESCRIPTION,
        epilog='example: a2a-serverless smoke "$ApiUrl" --api-key "$KEY" (the stack output)',
    )
    smoke.add_arguments(smoke_parser)
    doctor_parser = commands.add_parser(
        "doctor",
        help="before deploying: check the account and region against the template (AWS)",
        description=doctor.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    doctor.add_arguments(doctor_parser)
    return top


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.command == "dev":
        from a2a_serverless.cli.dev import run as run_dev

        return run_dev(args, sys.argv[1:] if argv is None else argv)
    if args.command == "invoke":
        from a2a_serverless.cli.invoke import run as run_invoke

        return run_invoke(args)
    if args.command in ("keys", "smoke", "doctor"):
        import a2a_serverless.cli.doctor as doctor
        import a2a_serverless.cli.keys as keys
        import a2a_serverless.cli.smoke as smoke

        return {"keys": keys.run, "smoke": smoke.run, "doctor": doctor.run}[args.command](args)
    from a2a_serverless.cli.scaffold import run as run_new

    return run_new(args)
