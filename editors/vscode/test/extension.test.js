// The extension's contract, without VS Code: `vscode` and `vscode-languageclient/node` are
// replaced by recording fakes, and extension.js runs against them (node --test test/).
// With GPULINT_EXECUTABLE set (tests/server/test_extension.py sets it), the server-path test
// starts that executable as the language client would and checks it answers `initialize`.
const assert = require("node:assert/strict");
const { spawn } = require("node:child_process");
const fs = require("node:fs");
const Module = require("node:module");
const path = require("node:path");
const { test, beforeEach } = require("node:test");

const ROOT = path.resolve(__dirname, "..");
const manifest = JSON.parse(fs.readFileSync(path.join(ROOT, "package.json"), "utf8"));

// --- fakes ---------------------------------------------------------------------------------
const state = { settings: {}, commands: new Map(), configListeners: [], clients: [], launch: null };

class FakeConfiguration {
  constructor(values) {
    Object.assign(this, values); // VS Code's WorkspaceConfiguration exposes the values as properties
  }
  get(key) {
    return this[key];
  }
}

const fakeVscode = {
  workspace: {
    getConfiguration: (section) => {
      assert.equal(section, "gpulint");
      return new FakeConfiguration(state.settings);
    },
    createFileSystemWatcher: (glob) => ({ glob, dispose() {} }),
    onDidChangeConfiguration: (listener) => {
      state.configListeners.push(listener);
      return { dispose() {} };
    },
  },
  commands: {
    registerCommand: (name, callback) => {
      state.commands.set(name, callback);
      return { dispose: () => state.commands.delete(name) };
    },
  },
};

class FakeLanguageClient {
  constructor(id, name, serverOptions, clientOptions) {
    Object.assign(this, { id, name, serverOptions, clientOptions, running: false, stopped: false });
    state.clients.push(this);
  }
  async start() {
    this.info = state.launch ? await state.launch(this.serverOptions) : undefined;
    this.running = true;
  }
  async stop() {
    this.running = false;
    this.stopped = true;
  }
}

const originalLoad = Module._load;
Module._load = function load(request, parent, isMain) {
  if (request === "vscode") return fakeVscode;
  if (request === "vscode-languageclient/node") return { LanguageClient: FakeLanguageClient };
  return originalLoad.call(this, request, parent, isMain);
};
const extension = require(path.join(ROOT, manifest.main));

function context() {
  return { subscriptions: [] };
}

beforeEach(() => {
  state.settings = {};
  state.commands.clear();
  state.configListeners.length = 0;
  state.clients.length = 0;
  state.launch = null;
});

// Start the server as vscode-languageclient does for {command, args}, and ask it to initialize.
function initializeOver(serverOptions) {
  return new Promise((resolve, reject) => {
    const child = spawn(serverOptions.command, serverOptions.args, { stdio: ["pipe", "pipe", "inherit"] });
    const timer = setTimeout(() => {
      child.kill();
      reject(new Error("no answer to initialize within 60 s"));
    }, 60000);
    let buffer = Buffer.alloc(0);
    child.on("error", reject);
    child.stdout.on("data", (chunk) => {
      buffer = Buffer.concat([buffer, chunk]);
      const end = buffer.indexOf("\r\n\r\n");
      if (end < 0) return;
      const length = Number(buffer.subarray(0, end).toString("ascii").match(/Content-Length: (\d+)/i)[1]);
      const body = buffer.subarray(end + 4);
      if (body.length < length) return;
      clearTimeout(timer);
      const answer = JSON.parse(body.subarray(0, length).toString("utf8"));
      send({ jsonrpc: "2.0", id: 2, method: "shutdown" });
      send({ jsonrpc: "2.0", method: "exit" });
      child.on("exit", (code) => resolve({ answer, code }));
    });
    function send(message) {
      const body = Buffer.from(JSON.stringify(message), "utf8");
      child.stdin.write(`Content-Length: ${body.length}\r\n\r\n`);
      child.stdin.write(body);
    }
    const capabilities = { notebookDocument: { synchronization: { dynamicRegistration: true } } }; // as the client sends
    send({ jsonrpc: "2.0", id: 1, method: "initialize", params: { processId: null, rootUri: null, capabilities } });
  });
}

// --- the contract ---------------------------------------------------------------------------
test("package.json declares the entry point, activation events and every command the extension registers", async () => {
  assert.ok(fs.existsSync(path.join(ROOT, manifest.main)), manifest.main);
  assert.ok(manifest.activationEvents.includes("onLanguage:python"));
  assert.ok(manifest.activationEvents.includes("onNotebook:jupyter-notebook"));
  await extension.activate(context());
  const declared = manifest.contributes.commands.map((c) => c.command).sort();
  assert.deepEqual([...state.commands.keys()].sort(), declared);
  assert.deepEqual(declared, ["gpulint.restart"]);
  for (const key of Object.keys(manifest.contributes.configuration.properties)) {
    assert.match(key, /^gpulint\./);
  }
});

test("the client starts `<gpulint.path> server` for Python files, unsaved buffers and notebook cells", async () => {
  state.settings = { path: "  /opt/venv/bin/gpulint  ", ignore: ["GPU102"] };
  await extension.activate(context());
  const [client] = state.clients;
  assert.deepEqual(client.serverOptions, { command: "/opt/venv/bin/gpulint", args: ["server"] });
  assert.equal(client.id, "gpulint"); // VS Code reads `gpulint.trace.server` for this id
  const selector = client.clientOptions.documentSelector;
  for (const scheme of ["file", "untitled", "vscode-notebook-cell"]) {
    assert.ok(selector.some((s) => s.scheme === scheme && s.language === "python"), scheme);
  }
  assert.equal(client.clientOptions.synchronize.configurationSection, "gpulint");
  assert.deepEqual(client.clientOptions.initializationOptions.ignore, ["GPU102"]);
  assert.ok(client.running);
});

test("without gpulint.path the executable on PATH is used", async () => {
  for (const value of [undefined, "", "   ", 42]) {
    state.settings = { path: value };
    state.clients.length = 0;
    await extension.activate(context());
    assert.equal(state.clients[0].serverOptions.command, "gpulint", String(value));
  }
});

test("the server-path setting starts a server that answers", { skip: !process.env.GPULINT_EXECUTABLE && "GPULINT_EXECUTABLE is not set (tests/server/test_extension.py sets it)" }, async () => {
  state.settings = { path: process.env.GPULINT_EXECUTABLE };
  state.launch = initializeOver;
  await extension.activate(context());
  const { answer, code } = state.clients[0].info;
  assert.equal(answer.id, 1);
  assert.equal(answer.result.serverInfo.name, "gpulint");
  assert.ok(answer.result.capabilities.notebookDocumentSync, "the server declares notebook sync");
  assert.equal(code, 0); // shutdown, then exit
});

test("gpulint: Restart Server stops the server and starts one with the current path", async () => {
  state.settings = { path: "/first/gpulint" };
  await extension.activate(context());
  state.settings = { path: "/second/gpulint" };
  await state.commands.get("gpulint.restart")();
  const [first, second] = state.clients;
  assert.ok(first.stopped && !first.running);
  assert.equal(second.serverOptions.command, "/second/gpulint");
  assert.ok(second.running);
});

test("a change of gpulint.path restarts the server; other settings go to the running one", async () => {
  await extension.activate(context());
  const [listener] = state.configListeners;
  await listener({ affectsConfiguration: (section) => section === "gpulint.ignore" });
  assert.equal(state.clients.length, 1);
  state.settings = { path: "/venv/bin/gpulint" };
  await listener({ affectsConfiguration: (section) => section === "gpulint.path" || section === "gpulint" });
  assert.equal(state.clients.length, 2);
  assert.equal(state.clients[1].serverOptions.command, "/venv/bin/gpulint");
});

test("deactivate stops the server", async () => {
  await extension.activate(context());
  await extension.deactivate();
  assert.ok(state.clients.at(-1).stopped);
});
