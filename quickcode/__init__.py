"""quickcode: self-hosted inline code completion (language server + latency-aware vLLM backend)."""
__version__ = "0.1.0"
