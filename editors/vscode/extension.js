// Starts `gpulint server` and connects it to VS Code; the server does all the work.
// `gpulint.path` names the executable; changing it, or the "gpulint: Restart Server" command,
// starts a fresh server (after upgrading gpulint in the environment, for instance).
const vscode = require("vscode");
const { LanguageClient } = require("vscode-languageclient/node");

const SERVER_ARGS = ["server"];
// Python files, unsaved Python buffers, and the Python cells of notebooks (the server declares
// notebook-document sync, so VS Code sends a notebook's cells together).
const DOCUMENTS = [
  { scheme: "file", language: "python" },
  { scheme: "untitled", language: "python" },
  { scheme: "vscode-notebook-cell", language: "python" },
];

let client;

function serverPath() {
  const configured = vscode.workspace.getConfiguration("gpulint").get("path");
  return typeof configured === "string" && configured.trim() ? configured.trim() : "gpulint";
}

function createClient() {
  return new LanguageClient(
    "gpulint",
    "gpulint",
    { command: serverPath(), args: SERVER_ARGS },
    {
      documentSelector: DOCUMENTS,
      synchronize: {
        // settings go to the server as {"gpulint": {...}}; edits to configuration files re-lint
        configurationSection: "gpulint",
        fileEvents: vscode.workspace.createFileSystemWatcher("**/{pyproject.toml,gpulint.toml}"),
      },
      initializationOptions: vscode.workspace.getConfiguration("gpulint"),
    },
  );
}

async function restart() {
  if (client) {
    const old = client;
    client = undefined;
    try {
      await old.stop();
    } catch (error) {
      // a server that already died cannot be stopped; start the new one anyway
    }
  }
  client = createClient();
  await client.start();
}

function activate(context) {
  context.subscriptions.push(
    vscode.commands.registerCommand("gpulint.restart", restart),
    vscode.workspace.onDidChangeConfiguration((event) => {
      if (event.affectsConfiguration("gpulint.path")) {
        return restart();
      }
      return undefined;
    }),
    { dispose: () => (client ? client.stop() : undefined) },
  );
  return restart();
}

function deactivate() {
  return client ? client.stop() : undefined;
}

module.exports = { activate, deactivate, restart, SERVER_ARGS, DOCUMENTS };
