;;; quickcode.el --- quickcode inline code completion for lsp-mode and eglot -*- lexical-binding: t; -*-

;; Package-Requires: ((emacs "27.1"))
;; Version: 0.1.0
;; Keywords: languages, tools, completion

;;; Commentary:

;; Runs the quickcode language server (`quickcode lsp', stdio) next to your language's own server.
;;
;; lsp-mode (>= 9.0.1, which has lsp-inline-completion.el): ghost text.  quickcode registers as an
;; add-on client, so pyright, gopls, ... keep running; suggestions appear after a short idle delay and
;; TAB (or RET) accepts; M-n / M-p cycle; C-g dismisses.  Accepting runs the item's `quickcode.accept'
;; command (lsp-inline-completion-accept executes it).
;;
;; eglot (one server per buffer): the `textDocument/completion' fallback, i.e. the suggestion as one
;; completion-at-point candidate; see editors/emacs/README.md.
;;
;;   (add-to-list 'load-path "/path/to/quickcode/editors/emacs")
;;   (require 'quickcode)
;;   (setq quickcode-endpoints '("wss://quickcode.example.com/v1/ws"))
;;   (add-hook 'python-mode-hook #'lsp-deferred)   ; lsp-mode, or:
;;   (quickcode-eglot-setup)                       ; eglot

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(eval-when-compile (require 'lsp-mode nil t))   ; the `with-lsp-workspace' macro, when lsp-mode is installed

(defgroup quickcode nil
  "Inline code completion from a self-hosted quickcode backend."
  :group 'tools
  :prefix "quickcode-")

(defcustom quickcode-command '("quickcode" "lsp")
  "Command line of the quickcode language server."
  :type '(repeat string))

(defcustom quickcode-endpoints nil
  "Backend WebSocket URLs, e.g. (\"wss://quickcode.example.com/v1/ws\").
nil: the server's environment (QUICKCODE_ENDPOINTS) or its default,
ws://127.0.0.1:8765/v1/ws."
  :type '(repeat string))

(defcustom quickcode-token nil
  "API token for the backend; nil: QUICKCODE_TOKEN from the server's environment."
  :type '(choice (const nil) string))

(defcustom quickcode-settings '(:enabled t :debounceMs 50 :maxTokens 64)
  "Other server settings (quickcode/lsp_client/config.py, camelCase), as a plist.
E.g. (:enabled t :languages (:python t :markdown :json-false) :maxTokens 64)."
  :type 'plist)

(defcustom quickcode-major-modes
  '(python-mode python-ts-mode js-mode js-ts-mode typescript-mode typescript-ts-mode tsx-ts-mode
    go-mode go-ts-mode rust-mode rust-ts-mode java-mode java-ts-mode c-mode c-ts-mode c++-mode c++-ts-mode
    sh-mode bash-ts-mode ruby-mode ruby-ts-mode lua-mode emacs-lisp-mode)
  "Major modes (and modes derived from them) where quickcode runs."
  :type '(repeat symbol))

(defcustom quickcode-idle-delay 0.2
  "Seconds of idle time after typing before ghost text is asked for (lsp-mode)."
  :type 'number)

(defcustom quickcode-tab-accepts t
  "Non-nil: TAB accepts the shown suggestion.
lsp-mode's default is RET to accept and TAB to show the next one."
  :type 'boolean)

(defvar quickcode-status nil
  "Last `$/quickcode/status' from the server (a hash table).
Keys: connected, endpoint, recent_first_chunk_ms_p50, acceptance_rate, ...")

(defun quickcode--options ()
  "initializationOptions / the `quickcode' settings section, as a plist.
Empty endpoints and token are left out so that the server's environment applies."
  (append (when quickcode-endpoints (list :endpoints (vconcat quickcode-endpoints)))
          (when (and quickcode-token (not (string-empty-p quickcode-token))) (list :token quickcode-token))
          quickcode-settings))

(defun quickcode--major-mode-p (mode)
  (cl-some (lambda (m) (provided-mode-derived-p mode m)) quickcode-major-modes))

;;;; lsp-mode

(declare-function lsp-register-client "lsp-mode")
(declare-function make-lsp-client "lsp-mode")
(declare-function lsp-stdio-connection "lsp-mode")
(declare-function lsp--set-configuration "lsp-mode")
(declare-function lsp-find-workspace "lsp-mode")
(declare-function lsp-request "lsp-mode")
(declare-function lsp-inline-completion-display "lsp-inline-completion")
(declare-function lsp-inline-completion-accept "lsp-inline-completion")
(declare-function lsp-inline-completion--overlay-visible "lsp-inline-completion")
(defvar lsp-inline-completion-active-map)

(defvar-local quickcode--timer nil)

(defun quickcode--lsp-workspace ()
  (and (fboundp 'lsp-find-workspace) (lsp-find-workspace 'quickcode nil)))

(defun quickcode--display (buffer)
  (when (and (buffer-live-p buffer) (eq buffer (current-buffer))
             (fboundp 'lsp-inline-completion-display)
             (not (lsp-inline-completion--overlay-visible)))
    (lsp-inline-completion-display t)))          ; t: automatic trigger, silent when empty

(defun quickcode--post-command ()
  (when quickcode--timer (cancel-timer quickcode--timer) (setq quickcode--timer nil))
  (when (memq this-command '(self-insert-command newline indent-for-tab-command))
    (setq quickcode--timer
          (run-with-idle-timer quickcode-idle-delay nil #'quickcode--display (current-buffer)))))

(define-minor-mode quickcode-lsp-auto-mode
  "Ask the quickcode server for ghost text after typing (lsp-mode)."
  :lighter " qc"
  (if quickcode-lsp-auto-mode
      (add-hook 'post-command-hook #'quickcode--post-command nil t)
    (remove-hook 'post-command-hook #'quickcode--post-command t)))

(defun quickcode--lsp-managed ()
  (when (and (quickcode--lsp-workspace) (featurep 'lsp-inline-completion))
    (quickcode-lsp-auto-mode 1)))

(with-eval-after-load 'lsp-mode
  (require 'lsp-inline-completion nil t)
  (when (and quickcode-tab-accepts (boundp 'lsp-inline-completion-active-map))
    (define-key lsp-inline-completion-active-map (kbd "<tab>") #'lsp-inline-completion-accept)
    (define-key lsp-inline-completion-active-map (kbd "TAB") #'lsp-inline-completion-accept))
  (lsp-register-client
   (make-lsp-client
    :new-connection (lsp-stdio-connection (lambda () quickcode-command))
    :activation-fn (lambda (_file mode) (quickcode--major-mode-p mode))
    :add-on? t                                   ; beside the language's own server
    :priority -2
    :server-id 'quickcode
    :initialization-options #'quickcode--options
    :notification-handlers
    (let ((h (make-hash-table :test 'equal)))
      (puthash "$/quickcode/status" (lambda (_workspace params) (setq quickcode-status params)) h)
      h)
    :initialized-fn (lambda (workspace)
                      (with-lsp-workspace workspace
                        (lsp--set-configuration (list :quickcode (quickcode--options)))))))
  (add-hook 'lsp-managed-mode-hook #'quickcode--lsp-managed))

;;;; eglot (completion-at-point fallback)

(defvar eglot-server-programs)
(declare-function eglot-current-server "eglot")
(declare-function jsonrpc-request "jsonrpc")
(defvar eglot-workspace-configuration)

;;;###autoload
(defun quickcode-eglot-setup ()
  "Use quickcode as the eglot server of `quickcode-major-modes'.
Suggestions come as completion-at-point candidates (the fallback).
eglot runs one server per buffer: this replaces the language's own server."
  (require 'eglot)
  (add-to-list 'eglot-server-programs
               (cons quickcode-major-modes
                     (append quickcode-command
                             (list :initializationOptions (lambda (_server) (quickcode--options))))))
  (setq-default eglot-workspace-configuration
                (plist-put (copy-sequence (default-value 'eglot-workspace-configuration))
                           :quickcode (quickcode--options))))

;;;; commands

(defun quickcode--execute (command)
  (cond
   ((quickcode--lsp-workspace)
    (with-lsp-workspace (quickcode--lsp-workspace)
      (lsp-request "workspace/executeCommand" (list :command command :arguments []))))
   ((and (fboundp 'eglot-current-server) (eglot-current-server))
    (jsonrpc-request (eglot-current-server) :workspace/executeCommand (list :command command :arguments [])))
   (t (user-error "quickcode: no language server in this buffer"))))

(defun quickcode--get (obj key)
  (if (hash-table-p obj) (gethash key obj) (plist-get obj (intern (concat ":" key)))))

;;;###autoload
(defun quickcode-show-status ()
  "Show the connection state and recent latency."
  (interactive)
  (let* ((s (quickcode--execute "quickcode.status"))
         (p50 (quickcode--get s "recent_first_chunk_ms_p50")))
    (setq quickcode-status s)
    (message "quickcode: %s%s%s"
             (if (eq (quickcode--get s "connected") t) "connected" "disconnected")
             (if-let ((e (quickcode--get s "endpoint"))) (format " to %s" e) "")
             (if (numberp p50) (format ", first chunk p50 %d ms" p50) ""))))

;;;###autoload
(defun quickcode-latency-report ()
  "Show the server's latency report (markdown) in a buffer."
  (interactive)
  (let ((report (quickcode--execute "quickcode.latencyReport")))
    (with-current-buffer (get-buffer-create "*quickcode latency*")
      (let ((inhibit-read-only t))
        (erase-buffer)
        (insert "# quickcode latency report\n\n" report "\n"))
      (when (fboundp 'markdown-mode) (markdown-mode))
      (special-mode)
      (display-buffer (current-buffer)))))

;;;###autoload
(defun quickcode-toggle ()
  "Enable or disable completions (server side)."
  (interactive)
  (let* ((enabled (not (eq (quickcode--get (quickcode--execute "quickcode.status") "enabled") t))))
    (quickcode--execute (if enabled "quickcode.enable" "quickcode.disable"))
    (setq quickcode-settings (plist-put quickcode-settings :enabled (if enabled t :json-false)))
    (message "quickcode %s" (if enabled "enabled" "disabled"))))

(provide 'quickcode)
;;; quickcode.el ends here
