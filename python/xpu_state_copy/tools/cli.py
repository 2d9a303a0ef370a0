"""The `xpu-state-copy` command (also `python -m xpu_state_copy`)."""
import argparse
import importlib
import sys

# subcommand -> (module, help). Each module has add_arguments(parser) and run(args) -> exit code.
COMMANDS = {
    "selftest": ("xpu_state_copy.tools.selftest", "copy a realistic Mamba-like batch on the best device and verify it"),
    "doctor": ("xpu_state_copy.tools.doctor", "check this environment (torch, XPU, SYCL, vLLM, plugin) for the crash"),
    "repro": ("xpu_state_copy.tools.repro", "reproduce the int64 overflow of XPU addresses and show the fix"),
    "bench": ("xpu_state_copy.benchmarks.run", "time the copy against its peers; table, JSON and PNG"),
}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="xpu-state-copy", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (module_name, help_text) in COMMANDS.items():
        try:
            module = importlib.import_module(module_name)
        except ImportError as error:  # a part not installed here; say so only if it is asked for
            sub.add_parser(name, help=f"{help_text} (unavailable: {error})").set_defaults(unavailable=error)
            continue
        command = sub.add_parser(name, help=help_text, description=(module.__doc__ or "").strip())
        module.add_arguments(command)
        command.set_defaults(handler=module.run)
    args = parser.parse_args(argv)
    if getattr(args, "unavailable", None) is not None:
        parser.error(f"{args.command} is unavailable: {args.unavailable}")
    return int(args.handler(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
