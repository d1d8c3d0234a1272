"""Neovim: `:help quickcode` opens the plugin's Vim help, and `:checkhealth quickcode` reports the plugin, the
server command and `quickcode doctor`'s checks against the configured endpoint — with a fix for each failure
(no backend) and all green against a running backend (an in-process one over the fake engine)."""
from __future__ import annotations

import re
import shutil
import subprocess
import sys

import pytest

from quickcode.backend.launch import free_port
from quickcode.benchmarks.neovim_driver import nvim_binary
from tests.support.editor_helpers import REPO

pytestmark = [pytest.mark.editor, pytest.mark.neovim]


def run_nvim(tmp_path, *commands: str, timeout_s: float = 120) -> str:
    """Headless Neovim with a copy of editors/neovim on its runtimepath; each command runs in order, and
    `out` (a Lua function) appends lines to the file whose contents this returns."""
    plugin = tmp_path / "quickcode.nvim"
    if not plugin.exists():
        shutil.copytree(REPO / "editors" / "neovim", plugin)
    out = tmp_path / "out.txt"
    out.write_text("")
    prelude = (f"vim.opt.runtimepath:prepend([[{plugin}]]); vim.g.loaded_python3_provider = 0; "
               f"function _G.out(lines) vim.fn.writefile(lines, [[{out}]], 'a') end")
    args = [nvim_binary(), "--headless", "--clean", "-n", "--cmd", f"lua {prelude}",
            "-c", f"runtime plugin/quickcode.lua"]
    for c in commands:
        args += ["-c", c]
    args += ["-c", "qa!"]
    r = subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=timeout_s)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "E154" not in r.stderr and "Error" not in r.stderr, r.stderr[-3000:]   # duplicate tags, Lua errors
    return out.read_text()


def test_help_quickcode_opens_the_plugin_help(tmp_path):
    out = run_nvim(tmp_path, f"helptags {tmp_path / 'quickcode.nvim' / 'doc'}",
                   "help quickcode", "lua out({vim.fn.expand('%:t'), vim.api.nvim_get_current_line()})",
                   "help quickcode-setup", "lua out({vim.api.nvim_get_current_line()})",
                   "help :QuickcodeStatus", "lua out({vim.api.nvim_get_current_line()})")
    name, line, setup, status = out.splitlines()
    assert name == "quickcode.txt" and "*quickcode*" in line
    assert "*quickcode-setup*" in setup and "*:QuickcodeStatus*" in status


def checkhealth(tmp_path, setup_lua: str | None) -> str:
    cmds = [f"lua {setup_lua}"] if setup_lua else []
    cmds += ["checkhealth quickcode", "lua out(vim.api.nvim_buf_get_lines(0, 0, -1, false))"]
    return run_nvim(tmp_path, *cmds)


def server_setup(endpoint: str) -> str:
    return (f"require('quickcode').setup({{ cmd = {{ [[{sys.executable}]], '-m', 'quickcode', 'lsp' }}, "
            f"endpoints = {{ '{endpoint}' }} }})")


def test_checkhealth_says_why_with_no_backend(tmp_path):
    port = free_port()
    report = checkhealth(tmp_path, server_setup(f"ws://127.0.0.1:{port}/v1/ws"))
    assert "setup() was called; mode: inline" in report and "server command:" in report
    assert "OK asks on every change (ask = keystroke)" in report, report     # Neovim's state is reachable
    assert f"quickcode: backend ws://127.0.0.1:{port}/v1/ws" in report
    assert f"ERROR reachable: nothing listens on 127.0.0.1:{port} (connection refused)" in report, report
    assert "start the backend (`quickcode serve`" in report          # the fix, as health advice
    assert "token: not checked: reachable failed" in report


def test_checkhealth_is_green_against_a_running_backend(tmp_path, fake_backend):
    b = fake_backend()
    report = checkhealth(tmp_path, server_setup(b.ws_url))
    # "- ✅ OK reachable: ..." (the mark before the level depends on the Neovim version)
    levels = dict((name, level) for level, name in re.findall(r"^- (?:\S+ )?(OK|WARNING|ERROR) (\w+):", report, re.M))
    assert levels == {n: "OK" for n in ("reachable", "tls", "ready", "token", "protocol", "model", "latency")}, report
    assert "ERROR" not in report, report


def test_checkhealth_without_setup_says_so(tmp_path):
    report = checkhealth(tmp_path, None)
    assert "ERROR require(\"quickcode\").setup({...}) was not called" in report, report
