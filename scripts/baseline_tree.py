"""Copy an older source tree of this project under another import name, so that its build loads into the
same process as the current build and `xpu-state-copy bench --baseline NAME` times the two in turns.

Two builds cannot share a process as they are: both are the Python package `xpu_state_copy` and both
register the torch op namespace `xpu_state_copy` (a namespace has one TORCH_LIBRARY block per process).
Renaming every `xpu_state_copy` (the package folder, the op namespace, module names, strings) and the
distribution name `xpu-state-copy` gives a tree that builds and imports as a package of its own. Nothing
else changes: the kernels are the older tree's, and the XPU_STATE_COPY_* environment variables keep their
names, so its build honours the same settings.

Usage: python3 scripts/baseline_tree.py SOURCE_TREE DESTINATION [NAME]   (NAME defaults to xsc_baseline;
DESTINATION is replaced). scripts/device_cuda.sh runs it for BASELINE=DIR.
"""
import os
import pathlib
import shutil
import sys

PACKAGE = "xpu_state_copy"
DISTRIBUTION = "xpu-state-copy"
# Outputs of earlier builds, and hidden folders (.git, .venv, CI files): none is needed to build the tree.
SKIPPED = {"build", "dist", "__pycache__"}


def rename_tree(source, destination, name="xsc_baseline"):
    """Write the renamed copy; returns how many files had the old names in them."""
    source, destination = pathlib.Path(source), pathlib.Path(destination)
    if not name.isidentifier() or PACKAGE in name:
        raise ValueError(f"name {name!r}: expected a Python identifier other than {PACKAGE!r}")
    if not (source / "setup.py").is_file() or not (source / "python" / PACKAGE).is_dir():
        raise ValueError(f"source {str(source)!r} is not a source tree of this project "
                         f"(no setup.py and python/{PACKAGE}/)")
    if destination.resolve() == source.resolve() or source.resolve() in destination.resolve().parents:
        raise ValueError(f"destination {str(destination)!r} lies in the source tree {str(source)!r}")
    shutil.rmtree(destination, ignore_errors=True)
    changed = 0
    for folder, subfolders, files in os.walk(source):
        subfolders[:] = sorted(d for d in subfolders if d not in SKIPPED and not d.startswith("."))
        for file in sorted(files):
            path = pathlib.Path(folder, file)
            relative = path.relative_to(source)
            target = destination / pathlib.Path(*(name if part == PACKAGE else part for part in relative.parts))
            target.parent.mkdir(parents=True, exist_ok=True)
            data = path.read_bytes()
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                text = None  # binary: copied as it is
            if text is not None and (PACKAGE in text or DISTRIBUTION in text):
                data = text.replace(PACKAGE, name).replace(DISTRIBUTION, name.replace("_", "-")).encode("utf-8")
                changed += 1
            target.write_bytes(data)
            shutil.copymode(path, target)
    return changed


def main(argv):
    if len(argv) not in (2, 3):
        sys.exit(__doc__.split("\n\n")[-1])
    try:
        changed = rename_tree(*argv)
    except ValueError as exc:
        sys.exit(f"baseline_tree.py: {exc}")
    name = argv[2] if len(argv) == 3 else "xsc_baseline"
    print(f"{argv[1]}: {argv[0]} as package {name} ({changed} files renamed in)")


if __name__ == "__main__":
    main(sys.argv[1:])
