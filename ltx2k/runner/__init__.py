"""Running asv on a GPU runner: how asv is launched, its environment plugin and internals,
shard-run over the GPUs of one host, the machine's identity, the bytecode cache and the
per-process values of the benchmark processes."""
