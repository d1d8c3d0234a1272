"""Emacs for real: Debian's Emacs 28 + eglot 1.9 (scripts/setup.sh editors) runs `quickcode lsp` through
editors/emacs/quickcode.el (`quickcode-eglot-setup`), asks for completions at the cursor, gets the suggestion
as one completion-at-point candidate and inserts it with `completion-at-point`, which the language server
counts as accepted (quickcode.stats: eglot runs no item command) — against a running backend (an in-process
one over the fake engine: the test is about the editor path, not the model). lsp-mode's ghost text needs
lsp-mode 9, which Debian 12 does not ship: only its registration is tested (test_editor_configs.py)."""
from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import sys

import pytest

from tests.support.editor_helpers import REPO

pytestmark = [pytest.mark.editor]


def test_eglot_offers_the_suggestion_and_completion_at_point_inserts_it(tmp_path, fake_backend):
    assert shutil.which("emacs"), "Emacs is not installed: scripts/setup.sh editors installs emacs-nox"
    b = fake_backend()          # the fake engine writes "    return a + b" at the start of a line
    src = tmp_path / "add.py"
    src.write_text("def add(a, b):\n")
    load_path = [a for d in sorted(glob.glob("/usr/share/emacs/site-lisp/elpa/*/")) for a in ("-L", d)]
    script = f'''(progn
      (require 'eglot)
      (require 'quickcode)
      (setq quickcode-command (list "{sys.executable}" "-m" "quickcode" "lsp")
            quickcode-endpoints (list "{b.ws_url}")
            quickcode-settings (list :suggestionUnit "block")   ; the whole line as one item (not its first word)
            eglot-sync-connect 30)
      (quickcode-eglot-setup)
      (find-file "{src}")
      (goto-char (point-max))
      (apply #'eglot (eglot--guess-contact))
      (princ (format "server=%s\\n" (and (eglot-current-server) t)))
      (let ((cands nil) (tries 0))
        (while (and (not cands) (< tries 50))     ; the first request may race the backend connection
          (setq tries (1+ tries))
          (let ((capf (eglot-completion-at-point)))
            (setq cands (and capf (all-completions "" (nth 2 capf)))))
          (unless cands (accept-process-output nil 0.2)))
        (princ (format "candidates=%S\\n" (mapcar #'substring-no-properties cands))))
      (completion-at-point)
      (princ (format "buffer=%S\\n" (buffer-substring-no-properties (point-min) (point-max))))
      (let ((stats (jsonrpc-request (eglot-current-server) :workspace/executeCommand
                                    '(:command "quickcode.stats" :arguments []))))
        (princ (format "accepted_chars=%S\\n" (plist-get stats :accepted_chars))))
      (eglot-shutdown (eglot-current-server)))'''
    env = {**os.environ, "PYTHONPATH": str(REPO), "QUICKCODE_LSP_LOG": str(tmp_path / "lsp.log")}
    r = subprocess.run(["emacs", "--batch", "-Q", *load_path, "-L", str(REPO / "editors" / "emacs"), "--eval", script],
                       cwd=REPO, capture_output=True, text=True, timeout=180, env=env)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    assert "server=t" in r.stdout, r.stderr[-3000:]
    # the first answer may be the text final so far ("return"); completion-at-point asks again and gets it all
    assert re.search(r'candidates=\("(return a \+ b|return)"\)', r.stdout), r.stdout + r.stderr[-3000:]
    assert 'buffer="def add(a, b):\n    return a + b"' in r.stdout, r.stdout
    # eglot runs no item command: the language server counts the accept from the edit that inserted the item
    assert f"accepted_chars={len('    return a + b')}" in r.stdout, r.stdout + r.stderr[-3000:]
