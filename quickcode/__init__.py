"""quickcode: self-hosted inline code completion (language server + latency-aware vLLM backend)."""
from quickcode.protocol import __version__  # noqa: F401  (one place: the language server cannot import quickcode)
