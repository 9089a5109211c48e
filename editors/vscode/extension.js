// Starts `gpulint server` and connects it to VS Code; the server does all the work.
const vscode = require("vscode");
const { LanguageClient } = require("vscode-languageclient/node");

let client;

function activate(context) {
  const command = vscode.workspace.getConfiguration("gpulint").get("path") || "gpulint";
  client = new LanguageClient(
    "gpulint",
    "gpulint",
    { command, args: ["server"] },
    {
      documentSelector: [{ scheme: "file", language: "python" }, { scheme: "untitled", language: "python" }],
      synchronize: {
        // settings go to the server as {"gpulint": {...}}; edits to configuration files re-lint
        configurationSection: "gpulint",
        fileEvents: vscode.workspace.createFileSystemWatcher("**/{pyproject.toml,gpulint.toml}"),
      },
      initializationOptions: vscode.workspace.getConfiguration("gpulint"),
    },
  );
  context.subscriptions.push(client);
  return client.start();
}

function deactivate() {
  return client ? client.stop() : undefined;
}

module.exports = { activate, deactivate };
