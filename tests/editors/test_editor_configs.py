"""Configurations of the editors that are documented rather than driven here (Helix, Emacs): they parse,
name real server settings, and quickcode.el byte-compiles cleanly in Debian's Emacs and registers its lsp-mode
client and eglot program."""
from __future__ import annotations

import glob
import shutil
import subprocess
import tomllib

import pytest

from quickcode.lsp_client.config import ClientConfig
from tests.support.editor_helpers import REPO

pytestmark = [pytest.mark.editor]


def test_helix_languages_toml():
    d = tomllib.loads((REPO / "editors" / "helix" / "languages.toml").read_text())
    server = d["language-server"]["quickcode"]
    assert server["command"] == "quickcode" and server["args"] == ["lsp"]
    assert ClientConfig().update(server["config"]) == [], "config has keys the server ignores"
    for lang in d["language"]:
        entries = [e for e in lang["language-servers"] if isinstance(e, dict) and e.get("name") == "quickcode"]
        assert entries and entries[0]["only-features"] == ["completion"], lang


def test_emacs_quickcode_el_compiles_and_registers(tmp_path):
    """Debian's Emacs 28 + lsp-mode 8 + eglot 1.9 (scripts/setup_editors.sh installs them)."""
    assert shutil.which("emacs"), "Emacs is not installed: scripts/setup.sh editors installs emacs-nox"
    src = REPO / "editors" / "emacs" / "quickcode.el"
    shutil.copy(src, tmp_path / "quickcode.el")
    load_path = [a for d in sorted(glob.glob("/usr/share/emacs/site-lisp/elpa/*/")) for a in ("-L", d)]
    assert any("lsp-mode" in p for p in load_path) and any("eglot" in p for p in load_path), load_path
    comp = subprocess.run(["emacs", "--batch", "-Q", *load_path, "--eval", "(setq byte-compile-error-on-warn t)",
                           "-f", "batch-byte-compile", str(tmp_path / "quickcode.el")],
                          capture_output=True, text=True, timeout=120)
    assert comp.returncode == 0, comp.stderr[-3000:]
    check = """(progn
      (when (require 'lsp-mode nil t)
        (require 'quickcode)
        (let ((c (gethash 'quickcode lsp-clients)))
          (princ (format "lsp-client=%s add-on=%s\\n" (and c t) (and c (lsp--client-add-on? c))))))
      (require 'quickcode)
      (setq quickcode-endpoints '("ws://127.0.0.1:1/v1/ws"))
      (princ (format "options=%S\\n" (quickcode--options)))
      (when (require 'eglot nil t)
        (quickcode-eglot-setup)
        (princ (format "eglot=%S\\n" (cdr (car eglot-server-programs))))))"""
    run = subprocess.run(["emacs", "--batch", "-Q", *load_path, "-L", str(tmp_path), "--eval", check],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    out = run.stdout
    assert 'options=(:endpoints ["ws://127.0.0.1:1/v1/ws"] :enabled t' in out, out
    assert "lsp-client=t add-on=t" in out, out
    assert '"lsp" :initializationOptions' in out, out
