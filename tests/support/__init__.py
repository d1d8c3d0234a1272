"""Helpers shared by the tests of several packages: waits, WebSocket and LSP helpers, fakes, test hosts."""
