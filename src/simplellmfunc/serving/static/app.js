// The chat page: one session per browser tab, a turn's events read as Server-Sent Events
// from a POST (fetch streams), drawn as Markdown replies and tool call cards.
"use strict";

const $ = (id) => document.getElementById(id);
const log = $("log");
const query = new URLSearchParams(location.search);
if (query.get("token")) sessionStorage.setItem("slf-token", query.get("token"));
const token = sessionStorage.getItem("slf-token");
const sessionId = sessionStorage.getItem("slf-session") || newSessionId();
sessionStorage.setItem("slf-session", sessionId);
$("session").textContent = sessionId;

function newSessionId() {
  const bytes = crypto.getRandomValues(new Uint8Array(8));
  return "tab-" + Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

function api(path, body) {
  const headers = {"content-type": "application/json"};
  if (token) headers.authorization = "Bearer " + token;
  const init = body === undefined ? {headers} : {method: "POST", headers, body: JSON.stringify(body)};
  return fetch("api/" + path + "/" + encodeURIComponent(sessionId), init);
}

async function errorOf(response) {
  // {"error": text} from the chat API; {"error": {"message"}} from a server it is mounted in.
  let body = {};
  try { body = await response.json(); } catch { return response.status + " " + response.statusText; }
  const error = body.error;
  return typeof error === "string" ? error : (error && error.message) || String(response.status);
}

function element(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

function add(node, container) {
  const atBottom = log.scrollHeight - log.scrollTop - log.clientHeight < 40;
  (container || log).appendChild(node);
  if (atBottom) log.scrollTop = log.scrollHeight;
  return node;
}

function notice(text, kind) {
  return add(element("div", "notice " + (kind || ""), text));
}

function setStatus(text) { $("status").textContent = text; }

// -- replies -------------------------------------------------------------------------------

class Reply {
  constructor(container) { this.raw = ""; this.node = add(element("div", "msg assistant"), container); }
  append(text) { this.raw += text; this.node.innerHTML = renderMarkdown(this.raw); follow(); }
}

function follow() { log.scrollTop = log.scrollHeight; }

// -- tool call cards -----------------------------------------------------------------------

class ToolCard {
  constructor(id, name, container) {
    this.id = id;
    this.node = add(element("details", "tool running"), container);
    this.node.open = true;
    this.node.dataset.callId = id;
    const summary = element("summary");
    this.title = element("span", "tool-name", name);
    this.state = element("span", "tool-state", "running");
    summary.append(this.title, this.state);
    this.args = element("pre", "tool-args");
    this.output = element("pre", "tool-output");
    this.output.hidden = true;
    this.images = element("div", "tool-images");
    this.forks = element("div", "tool-forks");
    this.node.append(summary, this.args, this.output, this.images, this.forks);
    this.argText = "";
    this.subTurns = new Map();
  }
  // A sub-run this call started (a SelfReference fork, an agent used as a tool): drawn inside.
  subTurn(origin, index) {
    let turn = this.subTurns.get(origin.agent_call_id);
    if (!turn) {
      const box = element("div", "fork");
      box.dataset.agentCallId = origin.agent_call_id;
      box.appendChild(element("div", "fork-label", "⑂ " + (origin.agent || "fork " + (origin.fork_id || ""))));
      this.forks.appendChild(box);
      turn = new Turn(box, index);
      this.subTurns.set(origin.agent_call_id, turn);
    }
    return turn;
  }
  argumentsDelta(delta) { this.argText += delta; this.args.textContent = this.argText; }
  setArguments(args) {
    if (args && typeof args.code === "string") {
      this.args.textContent = args.code;
      this.args.classList.add("code");
    } else {
      this.args.textContent = JSON.stringify(args, null, 2);
    }
  }
  print(text, stream) {
    this.output.hidden = false;
    this.output.appendChild(element("span", stream, text));
    follow();
  }
  image(data) {
    const src = data.data ? "data:" + data.mime_type + ";base64," + data.data : data.url;
    if (!/^(data:image\/|https?:)/.test(src || "")) return;
    const img = element("img", "kernel-image");
    img.alt = "image from the kernel";
    img.src = src;
    this.images.appendChild(img);
    follow();
  }
  ask(data) {
    const form = element("form", "input-request");
    const label = element("label", "", data.prompt || "input()");
    const field = element("input");
    field.type = data.password ? "password" : "text";
    field.name = "value";
    field.autocomplete = "off";
    const button = element("button", "", "Answer");
    button.type = "submit";
    label.appendChild(field);
    form.append(label, button);
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      button.disabled = true;
      const response = await api("input", {request_id: data.request_id, value: field.value});
      if (response.ok) {
        form.replaceWith(element("div", "answered", (data.prompt || "") + (data.password ? "••••" : field.value)));
      } else {
        button.disabled = false;
        form.appendChild(element("div", "error", await errorOf(response)));
      }
    });
    this.node.insertBefore(form, this.images.nextSibling);
    field.focus();
    follow();
  }
  // A call waiting for the user's approval: Approve / Deny (with a reason) / Edit (the
  // arguments as JSON); the answer goes to /api/answer in the wire form of docs/wire.md.
  approval(event) {
    if (this.node.querySelector("form.approval")) return;  // drawn already (a redrawn wait)
    this.setArguments(event.arguments);
    this.node.classList.add("waiting");
    this.state.textContent = "waiting for approval: " + (event.reason || "");
    const form = element("form", "approval");
    form.appendChild(element("div", "approval-reason", event.reason || "this call needs approval"));
    const reason = element("input");
    reason.name = "reason";
    reason.placeholder = "reason (for a denial)";
    reason.autocomplete = "off";
    const edited = element("textarea", "approval-edit");
    edited.name = "arguments";
    edited.hidden = true;
    edited.value = JSON.stringify(event.arguments || {}, null, 2);
    const buttons = element("div", "approval-buttons");
    const approve = element("button", "approve", "Approve");
    const deny = element("button", "deny", "Deny");
    const edit = element("button", "edit", "Edit");
    for (const button of [approve, deny, edit]) button.type = "button";
    buttons.append(approve, deny, edit, reason);
    form.append(buttons, edited);
    const send = async (answer) => {
      for (const button of [approve, deny, edit]) button.disabled = true;
      const response = await api("answer", {request_id: event.tool_call_id, ...answer});
      if (!response.ok) {
        for (const button of [approve, deny, edit]) button.disabled = false;
        form.appendChild(element("div", "error", await errorOf(response)));
      }
    };
    approve.addEventListener("click", () => {
      if (edited.hidden) { send({decision: "approve"}); return; }
      let args;
      try { args = JSON.parse(edited.value); } catch (error) {
        form.appendChild(element("div", "error", "the arguments are not JSON: " + error.message));
        return;
      }
      send({decision: "edit", arguments: args});
    });
    deny.addEventListener("click", () => send({decision: "deny", reason: reason.value}));
    edit.addEventListener("click", () => {
      edited.hidden = false;
      approve.textContent = "Run edited";
      edit.disabled = true;
      edited.focus();
    });
    this.node.insertBefore(form, this.output);
    follow();
  }
  resolved(event) {
    this.node.classList.remove("waiting");
    for (const form of this.node.querySelectorAll("form.approval")) form.remove();
    const words = {approved: "approved", edited: "approved with edited arguments",
      denied: "denied", timeout: "no answer in time", cancelled: "cancelled"};
    const line = (words[event.outcome] || event.outcome) + (event.reason ? ": " + event.reason : "");
    this.node.insertBefore(element("div", "approval-outcome " + event.outcome, line), this.output);
    if (event.arguments) this.setArguments(event.arguments);
    this.state.textContent = event.outcome === "approved" || event.outcome === "edited" ? "running" : event.outcome;
  }
  fail(event) { this.failure = errorLine(event.error_type, event.message); }
  end(event) {
    this.node.classList.remove("running");
    this.node.classList.add(event.success ? "ok" : "failed");
    const seconds = typeof event.duration_s === "number" ? " · " + event.duration_s.toFixed(2) + " s" : "";
    const failure = this.failure || errorLine("", resultText(event.result));
    this.state.textContent = (event.success ? "done" : "failed: " + failure) + seconds;
    for (const form of this.node.querySelectorAll("form.input-request")) form.remove();
    const text = resultText(event.result);
    const result = element("details", "tool-result");
    // The summary shows the result's first line, so a closed card is not an empty one.
    const preview = text.split("\n").find((line) => line.trim()) || "(empty)";
    result.append(element("summary", "", "result: " + preview), element("pre", "", text));
    this.node.appendChild(result);
  }
}

function errorLine(type, message) {
  // One line for a failed card: the exception line of a failed cell, else the first line, with
  // the error type once (a message may start with "Error: <type>:" already).
  const lines = (message || "").split("\n").map((line) => line.trim()).filter(Boolean);
  const raised = lines.find((line) => /^[A-Za-z_.]*(Error|Exception|Interrupt|Exit)\b/.test(line));
  const line = (raised || lines[0] || "").replace(/^Error: /, "");
  const shown = type && type !== "ToolRetry" && !line.startsWith(type) ? type + ": " + line : line;
  return shown || "failed";
}

function looksFailed(text) {
  // A tool result restored from the history carries no flag: a failure reads "Error: ..." (a
  // tool that raised) or "Execution failed" (a PyRepl cell), after an optional note line.
  return /^(Note: .*\n)?(Error: |Execution failed)/.test(text || "");
}

function resultText(result) {
  // What the model read: a text, or [text, [images]] (the images are drawn above).
  if (result == null) return "";
  if (typeof result === "string") return result;
  if (Array.isArray(result)) {
    const texts = result.filter((part) => typeof part === "string");
    const images = result.filter(Array.isArray).reduce((n, list) => n + list.length, 0);
    return texts.join("\n") + (images ? "\n[" + images + " image(s)]" : "");
  }
  return JSON.stringify(result, null, 2);
}

// -- a turn --------------------------------------------------------------------------------

class Turn {
  // container: where its replies and cards go (the log, or a card's sub-run box); index: every
  // card of the turn by call id, sub-runs' included (shared with them).
  constructor(container, index) {
    this.container = container || log;
    this.nested = Boolean(container);
    this.replies = new Map();
    this.cards = index || new Map();
    this.streamed = new Set();
  }
  reply(origin) {
    let reply = this.replies.get(origin.agent_call_id);
    if (!reply) { reply = new Reply(this.container); this.replies.set(origin.agent_call_id, reply); }
    return reply;
  }
  card(id, name) {
    let card = this.cards.get(id);
    if (!card) { card = new ToolCard(id, name || "tool", this.container); this.cards.set(id, card); }
    return card;
  }
  handle(event) {
    const origin = event.origin || {};
    if (origin.fork_depth && !this.nested) {
      // A sub-run's event: into the card of the tool call that started it (left out without one).
      const parent = this.cards.get(origin.parent_tool_call_id);
      if (parent) parent.subTurn(origin, this.cards).handle(event);
      return;
    }
    switch (event.kind) {
      case "llm_call_start": this.streamed.delete(origin.agent_call_id); break;
      case "llm_chunk_arrive":
        if (event.text) { this.streamed.add(origin.agent_call_id); this.reply(origin).append(event.text); }
        break;
      case "llm_call_end":
        if (!this.streamed.has(origin.agent_call_id) && event.reply_text) this.reply(origin).append(event.reply_text);
        break;
      case "tool_call_arguments_delta":
        this.replies.delete(origin.agent_call_id);
        this.card(event.tool_call_id, event.tool_name).argumentsDelta(event.arguments_delta);
        break;
      case "tool_call_start":
        this.replies.delete(origin.agent_call_id);
        this.card(event.tool_call_id, event.tool_name).setArguments(event.arguments);
        break;
      case "approval_request":
        this.replies.delete(origin.agent_call_id);
        this.card(event.tool_call_id, event.tool_name).approval(event);
        break;
      case "approval_resolved": this.card(event.tool_call_id, event.tool_name).resolved(event); break;
      case "tool_call_error": this.card(event.tool_call_id, event.tool_name).fail(event); break;
      case "tool_call_end": this.card(event.tool_call_id, event.tool_name).end(event); break;
      case "custom": this.custom(event); break;
      case "llm_call_error": notice("model error: " + event.message, "error"); break;
      case "react_end": this.end(event, origin); break;
      case "error": notice(event.error + ": " + event.message, "error"); break;
    }
  }
  custom(event) {
    const card = event.tool_call_id ? this.card(event.tool_call_id, event.tool_name) : null;
    const data = event.data || {};
    if (!card) return;
    if (event.event_name === "kernel_stdout") card.print(data.text, "stdout");
    else if (event.event_name === "kernel_stderr") card.print(data.text, "stderr");
    else if (event.event_name === "kernel_image") card.image(data);
    else if (event.event_name === "kernel_input_request") card.ask(data);
  }
  end(event, origin) {
    if (origin.fork_id || this.nested) return;
    if (event.aborted) notice("stopped: " + (event.abort_reason || "aborted"), "aborted");
    else if (event.error) notice("the turn failed: " + event.error, "error");
    const usage = event.total_usage || {};
    const parts = [event.iterations + " step(s)", (usage.total_tokens || 0) + " tokens"];
    if (typeof event.duration_s === "number") parts.push(event.duration_s.toFixed(1) + " s");
    add(element("div", "usage", parts.join(" · ")));
  }
}

// -- sending, streaming, aborting ----------------------------------------------------------

let running = false;

function setRunning(value) {
  running = value;
  $("send").disabled = value;
  $("abort").disabled = !value;
  setStatus(value ? "running…" : "");
}

async function readEvents(response, onEvent) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const {value, done} = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, {stream: true});
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      const data = block.split("\n").filter((l) => l.startsWith("data: ")).map((l) => l.slice(6)).join("\n");
      if (data) onEvent(JSON.parse(data));
    }
  }
}

function emptyHint() {
  add(element("div", "empty-hint", "No messages yet: type one below and press Enter. " +
    "The replies stream in here, with a card for every tool call."));
}

async function send(text) {
  for (const hint of log.querySelectorAll(".empty-hint")) hint.remove();
  add(element("div", "msg user", text));
  follow();
  setRunning(true);
  try {
    const response = await api("chat", {message: text});
    if (!response.ok) {
      notice(await errorOf(response), "error");
      return;
    }
    const turn = new Turn();
    await readEvents(response, (event) => turn.handle(event));
  } catch (error) {
    notice("connection lost: " + error, "error");
  } finally {
    setRunning(false);
  }
}

$("composer").addEventListener("submit", (event) => {
  event.preventDefault();
  const text = $("message").value.trim();
  if (!text || running) return;
  $("message").value = "";
  send(text);
});

$("message").addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey) {
    event.preventDefault();
    $("composer").requestSubmit();
  }
});

$("abort").addEventListener("click", async () => {
  $("abort").disabled = true;
  setStatus("stopping…");
  await api("abort", {});
});

// -- the conversation so far (after a reload) ----------------------------------------------

async function restore() {
  const response = await api("history");
  if (response.status === 404) {  // a new tab: nothing said yet
    emptyHint();
    document.body.dataset.ready = "true";
    return;
  }
  if (!response.ok) { notice(await errorOf(response), "error"); return; }
  const body = await response.json();
  const {messages} = body;
  const cards = new Map();
  for (const message of messages) {
    if (message.role === "user") add(element("div", "msg user", message.text));
    else if (message.role === "assistant") {
      if (message.text) new Reply().append(message.text);
      for (const call of message.tool_calls) {
        const card = new ToolCard(call.id, call.name);
        card.node.open = false;
        try { card.setArguments(JSON.parse(call.arguments)); } catch { card.argumentsDelta(call.arguments); }
        cards.set(call.id, card);
      }
    } else if (message.role === "tool" && cards.has(message.tool_call_id)) {
      const card = cards.get(message.tool_call_id);
      card.end({success: !looksFailed(message.text), result: message.text});
    }
  }
  const {pending} = body;
  if (!messages.length && !(pending && pending.length)) emptyHint();
  follow();
  document.body.dataset.ready = "true";
  if (pending && pending.length) {
    if (body.running_message) add(element("div", "msg user", body.running_message));
    await resumeWaiting(pending);
  }
}

async function resumeWaiting(pending) {
  // The turn waits for the user (the page was reloaded meanwhile): redraw what it asks from the
  // session's pending state, then follow the rest of the turn.
  notice("the running turn waits for you", "waiting");
  const turn = new Turn();
  for (const wait of pending) turn.handle(wait);
  setRunning(true);
  try {
    for (let attempt = 0; attempt < 20; attempt++) {
      const response = await api("follow", {});
      if (response.ok) { await readEvents(response, (event) => turn.handle(event)); return; }
      if (response.status !== 409) { notice(await errorOf(response), "error"); return; }
      // 409: the old page's stream is not closed yet, or the turn has ended meanwhile.
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  } catch (error) {
    notice("connection lost: " + error, "error");
  } finally {
    setRunning(false);
  }
}

restore();
