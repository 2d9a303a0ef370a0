"""The `xpu-state-copy` command and its subcommands: selftest, doctor, repro (bench lives in benchmarks)."""
