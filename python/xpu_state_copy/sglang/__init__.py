"""The SGLang plugin (entry point: sglang.srt.plugins), which serves MambaPool.copy_from."""
