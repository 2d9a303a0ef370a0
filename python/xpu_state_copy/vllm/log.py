"""The vLLM plugin's logger, in a module of its own so that every part of the plugin can log without importing
the entry point (which imports them). A child of vLLM's "vllm" logger: its lines come out through vLLM's own
handler and format."""
import logging

logger = logging.getLogger("vllm.xpu_state_copy")
