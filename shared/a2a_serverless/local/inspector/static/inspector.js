// The inspector's live parts: the tasks list and a task's panels refreshed, the timeline
// followed over SSE, and the talk form sending to the stack's API as an A2A client does.
// Every value from a task goes into the page as text (textContent), never as markup.
"use strict";

const body = document.body;
const PREFIX = body.dataset.prefix;
const AUTH = body.dataset.auth;
const REFRESH_MS = 2000;

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

function cookie(name) {
  const found = document.cookie.split("; ").find((c) => c.startsWith(name + "="));
  return found ? decodeURIComponent(found.slice(name.length + 1)) : "";
}

// -- talking to the agent -------------------------------------------------------------------

function apiHeaders(form) {
  const headers = {};
  if (AUTH === "None") {
    const principal = form.elements.principal && form.elements.principal.value.trim();
    if (principal) headers["X-Local-Principal"] = principal;
  } else if (AUTH === "ApiKey") {
    headers["X-API-Key"] = cookie("a2a_inspector_credential");
  } else if (AUTH === "Jwt") {
    headers["Authorization"] = "Bearer " + cookie("a2a_inspector_credential");
  }
  return headers;
}

function fileAsBase64(file) {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(String(reader.result).split(",", 2)[1] || "");
    reader.onerror = () => reject(reader.error);
    reader.readAsDataURL(file);
  });
}

async function messageOf(form, version) {
  const text = form.elements.text.value;
  const file = form.elements.file.files[0];
  const taskId = form.elements.taskId ? form.elements.taskId.value : "";
  const messageId = crypto.randomUUID();
  const raw = file ? await fileAsBase64(file) : null;
  if (version === "0.3") {
    const parts = [];
    if (text) parts.push({ kind: "text", text });
    if (file) parts.push({ kind: "file", file: { bytes: raw, mimeType: file.type || "application/octet-stream", name: file.name } });
    const message = { kind: "message", messageId, role: "user", parts };
    if (taskId) message.taskId = taskId;
    return message;
  }
  const parts = [];
  if (text) parts.push({ text });
  if (file) parts.push({ raw, mediaType: file.type || "application/octet-stream", filename: file.name });
  const message = { messageId, role: "ROLE_USER", parts };
  if (taskId) message.taskId = taskId;
  return message;
}

async function request(form, binding, stream) {
  const headers = { "Content-Type": "application/json", ...apiHeaders(form) };
  if (binding === "rest") {
    headers["A2A-Version"] = "1.0";
    const message = await messageOf(form, "1.0");
    const path = stream ? "/message:stream" : "/message:send";
    return fetch(path, { method: "POST", headers, body: JSON.stringify({ message }) });
  }
  const v03 = binding === "jsonrpc-0.3";
  if (!v03) headers["A2A-Version"] = "1.0";
  const message = await messageOf(form, v03 ? "0.3" : "1.0");
  const method = v03 ? (stream ? "message/stream" : "message/send")
    : (stream ? "SendStreamingMessage" : "SendMessage");
  const payload = { jsonrpc: "2.0", id: crypto.randomUUID(), method, params: { message } };
  return fetch("/", { method: "POST", headers, body: JSON.stringify(payload) });
}

// The task an answer names: a Task, a stream event, or a JSON-RPC result of either.
function taskIdOf(answer) {
  if (!answer || typeof answer !== "object") return "";
  const value = answer.result !== undefined ? answer.result : answer;
  if (!value || typeof value !== "object") return "";
  if (value.task && value.task.id) return value.task.id;
  if (value.kind === "task" && value.id) return value.id;
  for (const key of ["statusUpdate", "artifactUpdate"]) {
    if (value[key] && value[key].taskId) return value[key].taskId;
  }
  if (value.taskId) return value.taskId;
  if (value.id && value.status) return value.id;
  return "";
}

// Reads an SSE answer to its end; `onEvent` gets each event's JSON.
async function readStream(response, onEvent) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const data = block.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trim()).join("\n");
      if (data) {
        try { onEvent(JSON.parse(data)); } catch (error) { /* not JSON: skipped */ }
      }
    }
  }
}

function setupTalk() {
  const form = document.getElementById("talk");
  if (!form) return;
  const result = document.getElementById("talk-result");
  const onTaskPage = body.dataset.page === "task";
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    result.textContent = "sending…";
    const binding = form.elements.binding.value;
    const stream = form.elements.mode.value === "stream";
    try {
      const response = await request(form, binding, stream);
      if (!response.ok) {
        result.textContent = `HTTP ${response.status}: ${await response.text()}`;
        return;
      }
      let opened = false;
      const open = (answer) => {
        const taskId = taskIdOf(answer);
        if (answer && answer.error) result.textContent = JSON.stringify(answer.error);
        if (taskId && !opened && !onTaskPage) {
          opened = true;
          window.location.assign(`${PREFIX}/tasks/${encodeURIComponent(taskId)}`);
        }
      };
      const type = response.headers.get("content-type") || "";
      if (type.includes("text/event-stream")) {
        result.textContent = "streaming…";
        await readStream(response, open);
        if (onTaskPage) result.textContent = "stream ended";
      } else {
        const answer = JSON.parse((await response.text()) || "{}");
        open(answer);
        if (onTaskPage) result.textContent = answer.error ? JSON.stringify(answer.error) : "sent";
        if (!taskIdOf(answer) && !answer.error) result.textContent = JSON.stringify(answer, null, 2);
      }
      form.elements.text.value = "";
      form.elements.file.value = "";
      window.dispatchEvent(new Event("a2a-sent"));
    } catch (error) {
      result.textContent = String(error);
    }
  });
  const cancel = document.getElementById("cancel");
  if (cancel) {
    cancel.addEventListener("click", async () => {
      const taskId = form.elements.taskId.value;
      const headers = { "Content-Type": "application/json", "A2A-Version": "1.0", ...apiHeaders(form) };
      const response = await fetch(`/tasks/${encodeURIComponent(taskId)}:cancel`, { method: "POST", headers, body: "{}" });
      result.textContent = response.ok ? "canceled" : `HTTP ${response.status}: ${await response.text()}`;
    });
  }
}

// -- the tasks list ---------------------------------------------------------------------------

function taskRow(row) {
  const tr = el("tr", "task");
  tr.dataset.taskId = row.task_id;
  const link = el("a", "task-link", row.task_id);
  link.href = `${PREFIX}/tasks/${encodeURIComponent(row.task_id)}`;
  const first = el("td");
  first.appendChild(link);
  tr.append(first, el("td", "owner", row.owner), el("td", "context", row.context_id),
    el("td", "state", row.state), el("td", "updated", row.updated));
  return tr;
}

function setupTasks() {
  const table = document.getElementById("tasks");
  if (!table) return;
  const tbody = table.tBodies[0];
  const refresh = async () => {
    const response = await fetch(`${PREFIX}/tasks.json${window.location.search}`, { cache: "no-store" });
    if (!response.ok) return;
    const page = await response.json();
    tbody.replaceChildren(...page.rows.map(taskRow));
  };
  setInterval(() => refresh().catch(() => {}), REFRESH_MS);
}

// -- a task -----------------------------------------------------------------------------------

function eventItem(event) {
  const li = el("li", `event ${event.kind}`);
  if (event.seq !== null && event.seq !== undefined) {
    li.dataset.seq = event.seq;
    li.append(el("span", "seq", `#${event.seq}`));
  }
  li.append(el("span", "kind", event.kind));
  if (event.state) li.append(el("span", "state", event.state));
  if (event.role) li.append(el("span", "role", event.role));
  li.append(el("span", "text", event.text));
  const details = el("details", "raw");
  details.append(el("summary", null, "raw JSON"));
  let pretty = event.raw;
  try { pretty = JSON.stringify(JSON.parse(event.raw), null, 2); } catch (error) { /* as stored */ }
  details.append(el("pre", null, pretty));
  li.append(details);
  return li;
}

function fillTable(id, rows, className, cells) {
  const table = document.getElementById(id);
  if (!table) return;
  table.tBodies[0].replaceChildren(...rows.map((row) => {
    const tr = el("tr", className);
    for (const [cellClass, value, pre] of cells(row)) {
      const td = el("td", cellClass || null);
      if (pre) {
        const details = el("details", pre);
        details.append(el("summary", null, pre), el("pre", null, value));
        td.append(details);
      } else {
        td.textContent = value === null || value === undefined ? "" : String(value);
      }
      tr.append(td);
    }
    return tr;
  }));
}

function setupTask() {
  if (body.dataset.page !== "task") return;
  const taskId = body.dataset.taskId;
  const timeline = document.getElementById("timeline");
  const history = document.getElementById("history");
  let lastSeq = Number(body.dataset.lastSeq || 0);
  let messages = history.children.length;
  const url = () => `${PREFIX}/tasks/${encodeURIComponent(taskId)}/events?after=${lastSeq}&history=${messages}`;
  let source = new EventSource(url());
  const follow = () => {
    source.addEventListener("end", () => source.close());  // the task ended: nothing follows
    source.addEventListener("history", (message) => {
      messages += 1;
      history.append(eventItem(JSON.parse(message.data)));
    });
    source.onmessage = (message) => {
      const event = JSON.parse(message.data);
      if (event.seq <= lastSeq) return;
      lastSeq = event.seq;
      timeline.append(eventItem(event));
    };
    // A reconnect resumes after what was shown (the URL names both counts).
    source.onerror = () => {
      if (source.readyState === EventSource.CLOSED) return;
      source.close();
      setTimeout(() => { source = new EventSource(url()); follow(); }, 1000);
    };
  };
  follow();
  // A follow-up message (this page's talk form) starts a new turn: follow again if ended.
  window.addEventListener("a2a-sent", () => {
    if (source.readyState === EventSource.CLOSED) { source = new EventSource(url()); follow(); }
  });
  const refresh = async () => {
    const response = await fetch(`${PREFIX}/tasks/${encodeURIComponent(taskId)}/panels.json`, { cache: "no-store" });
    if (!response.ok) return;
    const panels = await response.json();
    document.getElementById("state").textContent = panels.state;
    document.getElementById("updated").textContent = panels.updated;
    fillTable("executions", panels.executions, "execution", (e) => [
      ["name", e.name], ["machine", e.machine], ["status", e.status], [null, e.start], [null, e.stop]]);
    fillTable("flow-states", panels.flowStates, "flow-state", (f) => [
      ["turn", f.turn], ["step", f.step], [null, f.saved_by], ["state", f.state]]);
    fillTable("webhooks", panels.pushConfigs, "webhook", (c) => [
      [null, c.config_id], [null, c.url], [null, c.parked ? "yes" : "no"], [null, c.payload_version]]);
    fillTable("deliveries", panels.deliveries, "delivery", (d) => [
      ["time", d.time], [null, d.config_id], [null, d.seq],
      ["status-code", d.status_code !== null ? d.status_code : (d.error || "")],
      ["latency", d.latency_ms !== null ? `${Math.round(d.latency_ms)} ms` : ""],
      ["attempt", d.attempt], ["outcome", d.outcome], [null, d.payload || "", "payload"]]);
    if (panels.cost) {
      fillTable("cost", panels.cost, "unit", (u) => [
        ["service", u.service], ["units", u.units], ["usd", u.usd.toFixed(8)],
        ["usd-million", u.usdPerMillion.toFixed(2)]]);
    }
  };
  setInterval(() => refresh().catch(() => {}), REFRESH_MS);
}

setupTalk();
setupTasks();
setupTask();
