"""quickcode: self-hosted inline code completion (language server + latency-aware vLLM backend).

The project's packages live under this namespace: protocol (the wire), backend, lsp_client, draft_model,
benchmarks; cli.py and demo.py are the command line. Importing `quickcode` imports none of them (the
language-server wheel has no backend); `quickcode.__version__` is the wire package's, read on first use."""


def __getattr__(name: str):
    if name == "__version__":
        from quickcode.protocol import __version__
        return __version__
    raise AttributeError(f"module 'quickcode' has no attribute {name!r}")
