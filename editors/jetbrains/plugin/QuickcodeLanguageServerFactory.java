package com.example.quickcode;

import com.intellij.openapi.project.Project;
import com.redhat.devtools.lsp4ij.LanguageServerFactory;
import com.redhat.devtools.lsp4ij.server.ProcessStreamConnectionProvider;
import com.redhat.devtools.lsp4ij.server.StreamConnectionProvider;
import org.jetbrains.annotations.NotNull;

import java.util.ArrayList;
import java.util.List;

/**
 * Starts `quickcode lsp` on stdio. The backend is passed on the command line (`--endpoint`, repeatable);
 * without it the server reads QUICKCODE_ENDPOINTS / QUICKCODE_TOKEN from the IDE's environment.
 * A sketch for plugin authors: it is not compiled here (no JetBrains SDK on this machine).
 */
public class QuickcodeLanguageServerFactory implements LanguageServerFactory {

    @Override
    public @NotNull StreamConnectionProvider createConnectionProvider(@NotNull Project project) {
        return new QuickcodeServer();
    }

    static final class QuickcodeServer extends ProcessStreamConnectionProvider {
        QuickcodeServer() {
            List<String> commands = new ArrayList<>(List.of(
                    System.getenv().getOrDefault("QUICKCODE_COMMAND", "quickcode"), "lsp"));
            String endpoints = System.getenv("QUICKCODE_ENDPOINTS");
            if (endpoints == null || endpoints.isBlank()) {
                commands.addAll(List.of("--endpoint", "ws://127.0.0.1:8765/v1/ws"));
            }
            super.setCommands(commands);
        }
    }
}
