"""The vLLM plugin (entry point: vllm.general_plugins) and what it needs to read and patch vLLM's mamba_utils."""
