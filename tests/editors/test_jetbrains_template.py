"""The JetBrains integration, as far as it can be checked without an IDE: the LSP4IJ user-defined server
template (editors/jetbrains/lsp4ij-template) has the fields LSP4IJ's template deserializer reads (id, name,
programArgs per OS, env, fileTypeMappings with fileType.name/patterns + languageId, languageMappings), its
settings are real server settings, and the command line LSP4IJ would launch starts `quickcode lsp`, answers
`initialize` with inline completion, takes the template's settings and completes against the real backend
the way LSP4IJ drives it (initializationOptions, workspace/didChangeConfiguration, didOpen, inlineCompletion).

Run alone: .venv/bin/python -m pytest tests/editors/test_jetbrains_template.py
"""
from __future__ import annotations

import dataclasses
import json
import os
import queue
import shlex
import subprocess
import threading
import time
import xml.etree.ElementTree as ET

import pytest

from quickcode.lsp_client.config import ClientConfig
from tests.support.editor_helpers import CONTEXTS, QUICKCODE, REPO, Timer, failure_context
from tests.support.waits import until

pytestmark = [pytest.mark.editor]

TEMPLATE_DIR = REPO / "editors" / "jetbrains" / "lsp4ij-template"
PLUGIN_XML = REPO / "editors" / "jetbrains" / "plugin" / "plugin.xml"
# the files LSP4IJ's LanguageServerTemplateManager.createLsTemplate() picks up from a template folder
LSP4IJ_FILES = {"template.json", "settings.json", "settings.schema.json", "initializationOptions.json",
                "experimental.json", "clientSettings.json", "installer.json", "README.md"}


def load(name: str) -> dict:
    return json.loads((TEMPLATE_DIR / name).read_text())


def unix_program_args(template: dict) -> str:
    """What LSP4IJ's ServerTemplate.getOSProgramArgs() returns on Linux/macOS: the OS key, else "default"."""
    args = template["programArgs"]
    return args.get("unix") or args.get("mac") or args["default"]


def test_template_has_the_fields_lsp4ij_reads():
    assert {p.name for p in TEMPLATE_DIR.iterdir()} <= LSP4IJ_FILES
    t = load("template.json")
    # ServerTemplateJsonDeserializer: id, name (strings)
    assert isinstance(t["id"], str) and t["id"]
    assert isinstance(t["name"], str) and t["name"]
    # LanguageServerTemplateDeserializer: programArgs is an object OS -> command line (Map<String, String>)
    assert isinstance(t["programArgs"], dict) and "default" in t["programArgs"]
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in t["programArgs"].items())
    assert set(t["programArgs"]) <= {"default", "windows", "mac", "unix"}
    # env: includeSystemEnvironmentVariables (bool) + variables (object of strings)
    env = t.get("env", {})
    assert isinstance(env.get("includeSystemEnvironmentVariables", False), bool)
    assert all(isinstance(v, str) for v in env.get("variables", {}).values())
    # fileTypeMappings: fileType (object, required) with name and/or patterns, and a languageId
    mappings = t["fileTypeMappings"]
    assert mappings
    for m in mappings:
        ft = m["fileType"]
        assert isinstance(ft, dict) and ("name" in ft or ft.get("patterns")), m
        assert all(isinstance(p, str) and p for p in ft.get("patterns", [])), m
        assert isinstance(m["languageId"], str) and m["languageId"], m
    for m in t.get("languageMappings", []):
        assert isinstance(m["language"], str) and isinstance(m.get("languageId", ""), str)
    language_ids = {m["languageId"] for m in mappings}
    assert {"python", "javascript", "typescript", "java", "go", "rust"} <= language_ids
    py = next(m for m in mappings if m["languageId"] == "python")
    assert "*.py" in py["fileType"]["patterns"]


def test_template_settings_are_server_settings():
    known = {f.name for f in dataclasses.fields(ClientConfig)}
    init = load("initializationOptions.json")
    settings = load("settings.json")
    assert ClientConfig().update(init) == [], "initializationOptions.json has keys the server ignores"
    assert set(settings) == {"quickcode"}, "settings.json: one `quickcode` section (workspace/didChangeConfiguration)"
    cfg = ClientConfig()
    assert cfg.update(settings) == [], "settings.json has keys the server ignores"
    assert cfg.enabled and cfg.max_tokens == settings["quickcode"]["maxTokens"]
    schema = load("settings.schema.json")
    props = schema["properties"]["quickcode"]["properties"]
    import re
    snake = {re.sub(r"(?<!^)(?=[A-Z])", "_", k).lower() for k in props}
    assert snake <= known, snake - known
    assert set(settings["quickcode"]) <= set(props)


def test_plugin_xml_snippet_is_consistent():
    root = ET.parse(PLUGIN_XML).getroot()
    assert "com.redhat.devtools.lsp4ij" in [d.text for d in root.iter("depends")]
    ext = next(e for e in root.iter("extensions") if e.get("defaultExtensionNs") == "com.redhat.devtools.lsp4ij")
    servers = [s.get("id") for s in ext.iter("server")]
    assert servers == ["quickcode"] and ext.find("server").get("factoryClass")
    mappings = [m for m in ext if m.tag in ("fileNamePatternMapping", "languageMapping", "fileTypeMapping")]
    assert mappings and all(m.get("serverId") == "quickcode" and m.get("languageId") for m in mappings)


class StdioLsp:
    """A minimal LSP client over stdio (Content-Length framing), as LSP4IJ speaks to a process."""

    def __init__(self, argv: list[str], env: dict, cwd):
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     env=env, cwd=cwd)
        self.messages: queue.Queue = queue.Queue()
        self.notifications: list[dict] = []
        self.next_id = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        out = self.proc.stdout
        while True:
            headers = {}
            while True:
                line = out.readline()
                if not line:
                    return
                line = line.decode().strip()
                if not line:
                    break
                k, v = line.split(":", 1)
                headers[k.lower()] = v.strip()
            body = json.loads(out.read(int(headers["content-length"])))
            self.messages.put(body)

    def send(self, msg: dict) -> None:
        data = json.dumps({"jsonrpc": "2.0", **msg}).encode()
        self.proc.stdin.write(f"Content-Length: {len(data)}\r\n\r\n".encode() + data)
        self.proc.stdin.flush()

    def notify(self, method: str, params) -> None:
        self.send({"method": method, "params": params})

    def request(self, method: str, params, timeout: float = 30.0):
        self.next_id += 1
        rid = self.next_id
        self.send({"id": rid, "method": method, "params": params})
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                msg = self.messages.get(timeout=0.2)
            except queue.Empty:
                assert self.proc.poll() is None, f"server exited: {self.proc.stderr.read().decode()[-2000:]}"
                continue
            if msg.get("id") == rid and "method" not in msg:
                assert "error" not in msg, msg
                return msg.get("result")
            if "method" in msg and "id" in msg:          # a server → client request: answer it
                self.send({"id": msg["id"], "result": None})
            elif "method" in msg:
                self.notifications.append(msg)
        raise TimeoutError(method)

    def close(self) -> None:
        try:
            self.request("shutdown", None, timeout=10)
            self.notify("exit", None)
            self.proc.wait(10)
        except Exception:
            self.proc.kill()
            self.proc.wait(10)


def start_from_template(tmp_path, lsp_log) -> StdioLsp:
    """Launch the template's command line the way LSP4IJ does: split programArgs, resolve the program on the
    IDE's PATH (here the project venv's bin, where `pip install` puts `quickcode`), system env included."""
    t = load("template.json")
    argv = shlex.split(unix_program_args(t))
    assert argv[:2] == ["quickcode", "lsp"], argv
    env = dict(os.environ) if t.get("env", {}).get("includeSystemEnvironmentVariables") else {}
    env.update(t.get("env", {}).get("variables", {}))
    env["PATH"] = os.path.dirname(QUICKCODE) + os.pathsep + os.environ.get("PATH", "")
    env["QUICKCODE_LSP_LOG"] = str(lsp_log)
    return StdioLsp(argv, env, tmp_path)


def initialize_params(tmp_path, init_options: dict) -> dict:
    return {"processId": os.getpid(), "clientInfo": {"name": "LSP4IJ-like test client", "version": "0.20"},
            "rootUri": tmp_path.as_uri(), "initializationOptions": init_options,
            "capabilities": {"textDocument": {"inlineCompletion": {"dynamicRegistration": False},
                                              "completion": {"completionItem": {"snippetSupport": True}}},
                             "workspace": {"configuration": True, "didChangeConfiguration": {"dynamicRegistration": True}}}}


def test_template_command_starts_the_server_and_answers_initialize(tmp_path):
    t = Timer()
    lsp_log = tmp_path / "lsp.log"
    lsp = start_from_template(tmp_path, lsp_log)
    try:
        result = lsp.request("initialize", initialize_params(tmp_path, load("initializationOptions.json")))
        t.lap("initialize")
        caps = result["capabilities"]
        assert "inlineCompletionProvider" in caps, caps
        assert "completionProvider" in caps
        assert {"quickcode.accept", "quickcode.status", "quickcode.latencyReport"} <= set(
            caps["executeCommandProvider"]["commands"])
        assert result["serverInfo"]["name"] == "quickcode"
        lsp.notify("initialized", {})
        lsp.notify("workspace/didChangeConfiguration", {"settings": load("settings.json")})
        status = lsp.request("workspace/executeCommand", {"command": "quickcode.status", "arguments": []})
        assert status["enabled"] is True
        assert [e["url"] for e in status["endpoints"]] == load("initializationOptions.json")["endpoints"]
        t.lap("status")
    finally:
        lsp.close()
        t.report("jetbrains template: initialize")


def test_template_settings_complete_against_the_real_backend(backend, tmp_path):
    t = Timer()
    lsp_log = tmp_path / "lsp.log"
    lsp = start_from_template(tmp_path, lsp_log)
    try:
        init = {**load("initializationOptions.json"), "endpoints": [backend.ws_url]}
        lsp.request("initialize", initialize_params(tmp_path, init))
        lsp.notify("initialized", {})
        lsp.notify("workspace/didChangeConfiguration", {"settings": load("settings.json")})
        until(lambda: lsp.request("workspace/executeCommand", {"command": "quickcode.status",
                                                               "arguments": []})["connected"],
              lambda: "the language server to connect\n" + failure_context(lsp_log, backend), hang_s=60, poll_s=0.2)
        t.lap("connected")
        items = []
        for i, (before, typed) in enumerate(CONTEXTS):
            text = before + typed
            uri = (tmp_path / f"t{i}.py").as_uri()
            lsp.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1,
                                                                 "text": text}})
            lines = text.split("\n")
            pos = {"line": len(lines) - 1, "character": len(lines[-1])}
            res = lsp.request("textDocument/inlineCompletion", {
                "textDocument": {"uri": uri}, "position": pos, "context": {"triggerKind": 1}})
            items = (res or {}).get("items", [])
            if items and items[0]["insertText"].strip():
                break
        t.lap("inline_completion")
        assert items, "no inline completion in any context\n" + failure_context(lsp_log, backend)
        item = items[0]
        assert item["range"]["start"] == pos and item["command"]["command"] == "quickcode.accept"
        # what LSP4IJ does on accept: run the item's command on the server
        lsp.request("workspace/executeCommand", item["command"])
        stats = lsp.request("workspace/executeCommand", {"command": "quickcode.stats", "arguments": []})
        assert stats["outcomes"]["accepted"] == 1, stats["outcomes"]
        print(f"[jetbrains template] suggestion={item['insertText']!r}")
    finally:
        lsp.close()
        t.report("jetbrains template: real backend")
