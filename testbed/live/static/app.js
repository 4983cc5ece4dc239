// The live page: draws the layout the server computed, then applies each pushed update.
// The server sends everything that changes once per refresh (and at once after a controller
// event); the page keeps no state of its own beyond the selection.
"use strict";

const token = new URLSearchParams(location.search).get("token");
const withToken = (path) => (token ? `${path}?token=${encodeURIComponent(token)}` : path);
const FRESH_S = 5; // a link that went down this recently is drawn as "just failed"
const STATE_NAMES = ["GOOD", "SKIP", "ASSUMED_BAD", "DENIED"];

const PATH_KEPT_MS = 2000; // an EV's path is asked again after this (links fail, groups change)

// hover: the EV whose path is shown ({host, qp, ev, plane, path}); paths: answers by EV.
// jobOpen: a job's connections shown or folded, where the user chose (by job id).
const live = { cy: null, layout: null, update: null, updates: 0, selected: null, hover: null, paths: new Map(), jobOpen: new Map() };
window.liveView = live; // for the browser tests and for a curious user's console

function mbps(bps) {
  if (bps === null || bps === undefined) return "–";
  if (bps >= 1e9) return `${(bps / 1e9).toFixed(2)} Gb/s`;
  if (bps >= 1e6) return `${(bps / 1e6).toFixed(2)} Mb/s`;
  if (bps >= 1e3) return `${(bps / 1e3).toFixed(1)} kb/s`;
  return `${bps.toFixed(0)} b/s`;
}

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value);
  }
  for (const child of children) node.append(child);
  return node;
}

async function start() {
  const response = await fetch(withToken("api/layout"));
  live.layout = await response.json();
  document.getElementById("title").textContent = `MRC testbed: ${live.layout.topology}`;
  drawGraph(live.layout);
  fillHostChoices(live.layout);
  const stream = new EventSource(withToken("api/events"));
  stream.onmessage = (message) => applyUpdate(JSON.parse(message.data));
  stream.onerror = () => {
    const status = document.getElementById("controller");
    status.textContent = "page server unreachable: retrying…";
    status.className = "stale";
  };
}

function drawGraph(layout) {
  const elements = [];
  for (const node of layout.nodes) {
    elements.push({
      group: "nodes",
      data: { id: node.id, label: node.id, kind: node.kind, tier: node.tier ?? -1 },
      position: { x: node.x, y: node.y },
      classes: node.kind === "host" ? "host" : `switch tier${Math.min(node.tier, 3)}`,
    });
  }
  for (const link of layout.links) {
    elements.push({
      group: "edges",
      data: {
        id: link.id, source: link.source, target: link.target, a: link.a, b: link.b,
        kind: link.kind, state: "untracked", width: 2, ab: "", ba: "",
      },
      classes: "untracked",
    });
  }
  live.cy = cytoscape({
    container: document.getElementById("graph"),
    elements,
    layout: { name: "preset" },
    minZoom: 0.05,
    maxZoom: 4,
    wheelSensitivity: 0.3,
    style: [
      { selector: "node", style: { label: "data(label)", "font-size": 11, "text-valign": "center", "text-halign": "center", width: 30, height: 30, color: "#fff", "text-outline-width": 0 } },
      { selector: "node.switch", style: { shape: "round-rectangle", "background-color": "#2f5d8a" } },
      { selector: "node.tier1", style: { "background-color": "#4f7cac" } },
      { selector: "node.tier2, node.tier3", style: { "background-color": "#6b5ca5" } },
      { selector: "node.host", style: { shape: "ellipse", "background-color": "#7a8794", width: 24, height: 24, "font-size": 10 } },
      { selector: "node.out", style: { "background-color": "#d62828" } },
      { selector: "node:selected", style: { "border-width": 3, "border-color": "#f08c00" } },
      { selector: "edge", style: { width: "data(width)", "line-color": "#4a9d5b", "curve-style": "straight", "source-label": "data(ab)", "target-label": "data(ba)", "source-text-offset": 34, "target-text-offset": 34, "font-size": 9, color: "#1d232b", "text-background-color": "#fff", "text-background-opacity": 0.8, "text-background-padding": 1, "min-zoomed-font-size": 7 } },
      { selector: "edge.untracked", style: { "line-color": "#98a2ad" } },
      { selector: "edge.down", style: { "line-color": "#d62828", "line-style": "dashed" } },
      { selector: "edge.fresh", style: { "line-color": "#f08c00", "line-style": "solid" } },
      { selector: "edge:selected", style: { "overlay-color": "#f08c00", "overlay-opacity": 0.25, "overlay-padding": 4 } },
      { selector: "edge.path", style: { "line-color": "#7b2cbf", "line-style": "solid", width: 7, "z-index": 10, "target-arrow-shape": "none" } },
      { selector: "node.path", style: { "border-width": 3, "border-color": "#7b2cbf" } },
    ],
  });
  fitView();
  live.cy.on("tap", "edge", (event) => select({ kind: "link", id: event.target.id() }));
  live.cy.on("tap", "node", (event) => select({ kind: event.target.data("kind"), id: event.target.id() }));
  live.cy.on("tap", (event) => { if (event.target === live.cy) select(null); });
  window.addEventListener("resize", fitView);
}

// The whole fabric in view, but no larger than 1.3x: a small fabric's labels stay readable.
function fitView() {
  live.cy.fit(undefined, 30);
  if (live.cy.zoom() > 1.3) {
    live.cy.zoom(1.3);
    live.cy.center();
  }
}

function fillHostChoices(layout) {
  const hosts = layout.nodes.filter((n) => n.kind === "host").map((n) => n.id);
  for (const [id, pick] of [["transfer-source", 0], ["transfer-destination", hosts.length - 1]]) {
    const select = document.getElementById(id);
    for (const host of hosts) select.append(el("option", { value: host }, host));
    select.value = hosts[pick];
  }
  document.getElementById("transfer-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const body = {
      source: document.getElementById("transfer-source").value,
      destination: document.getElementById("transfer-destination").value,
      duration: parseFloat(document.getElementById("transfer-duration").value) || null,
    };
    const evs = parseInt(document.getElementById("transfer-evs").value, 10);
    if (evs) body.evs = evs;
    act("transfer", body);
  });
}

async function act(op, body) {
  const result = document.getElementById("action-result");
  result.textContent = `${op}…`;
  result.className = "quiet";
  try {
    const headers = { "Content-Type": "application/json" };
    if (token) headers["X-Live-Token"] = token;
    const response = await fetch(`api/${op}`, { method: "POST", headers, body: JSON.stringify(body) });
    const answer = await response.json();
    result.textContent = answer.ok ? answer.message : `error: ${answer.error}`;
    result.className = answer.ok ? "" : "error";
  } catch (error) {
    result.textContent = `error: ${error}`;
    result.className = "error";
  }
}

// Which of the run's controllers is primary, and a restart button for a dead one (a run
// with one controller shows just it).
function showControllers(controllers) {
  const box = document.getElementById("controllers");
  const key = JSON.stringify(controllers);
  if (box.dataset.shown === key) return; // unchanged: keep the buttons under the pointer
  box.dataset.shown = key;
  box.replaceChildren();
  for (const [name, stance] of Object.entries(controllers)) {
    const item = el("span", { class: `controller-${stance}`, id: `controller-${name}` }, `${name}: ${stance}`);
    if (stance === "dead") {
      item.append(" ", el("button", { id: `button-restart-${name}`, onclick: () => act("controller_restart", { controller: name }) }, "restart"));
    }
    box.append(item, " ");
  }
  if (Object.values(controllers).length && !Object.values(controllers).some((s) => s !== "dead")) {
    box.append(el("span", { class: "error" }, "no controller: the fabric is unmanaged"));
  }
}

function linkState(link, wall) {
  if (link.cut || link.state === "down") {
    const changed = link.changed_at ? Date.parse(link.changed_at) / 1000 : null;
    return changed !== null && wall - changed < FRESH_S ? "fresh down" : "down";
  }
  return link.state === "up" ? "up" : "untracked";
}

function edgeWidth(bps) {
  if (!bps) return 2;
  return Math.min(12, 2 + 1.6 * Math.log10(1 + bps / 1e5));
}

function applyUpdate(update) {
  live.update = update;
  live.updates += 1;
  const status = document.getElementById("controller");
  const ctl = update.controller;
  if (ctl.error) {
    status.textContent = `controller: ${ctl.error}`;
    status.className = "stale";
  } else {
    const failover = ctl.last_failover;
    const took = failover && failover.duration_ms !== undefined ? `, last failover ${failover.duration_ms} ms` : "";
    const routing = ctl.routing && ctl.routing.mode ? `, routing ${ctl.routing.mode}` : "";
    status.textContent = `generation ${ctl.generation ?? "–"}${routing}${took}`;
    status.className = "";
  }
  showControllers(ctl.controllers || {});
  live.cy.batch(() => {
    for (const [id, link] of Object.entries(update.links)) {
      const edge = live.cy.getElementById(id);
      if (edge.empty()) continue;
      const state = linkState(link, update.wall);
      edge.classes(state);
      edge.data({
        state: state.replace("fresh ", ""),
        width: edgeWidth(Math.max(link.ab_bps || 0, link.ba_bps || 0)),
        ab: link.ab_bps ? mbps(link.ab_bps) : "",
        ba: link.ba_bps ? mbps(link.ba_bps) : "",
      });
    }
    for (const [name, view] of Object.entries(update.switches || {})) {
      const node = live.cy.getElementById(name);
      if (!node.empty()) node.toggleClass("out", !view.in_service);
    }
  });
  showSelection();
  showEvents(update.events);
  showTransfers(update);
  drawPath(); // the link classes above replaced the highlight
}

function select(selection) {
  live.selected = selection;
  showSelection();
}

// The buttons are rebuilt only when the selection changes: an update replacing them between a
// click's mousedown and mouseup would swallow the click.
function showSelection() {
  const text = document.getElementById("selected");
  const buttons = document.getElementById("selection-buttons");
  const selection = live.selected;
  const key = selection ? `${selection.kind} ${selection.id}` : "";
  const rebuild = buttons.dataset.for !== key;
  if (rebuild) {
    buttons.replaceChildren();
    buttons.dataset.for = key;
  }
  if (!selection) {
    text.textContent = "Click a link or a switch.";
    return;
  }
  if (selection.kind === "link") {
    const edge = live.cy.getElementById(selection.id);
    const link = (live.update && live.update.links[selection.id]) || {};
    text.textContent = `link ${selection.id}: ${edge.data("state")}${link.cut ? " (cut)" : ""}; ` +
      `${edge.data("a")}→${edge.data("b")} ${mbps(link.ab_bps)}, back ${mbps(link.ba_bps)}`;
    if (rebuild) {
      const [a, b] = [edge.data("a"), edge.data("b")];
      buttons.append(
        el("button", { id: "button-fail", onclick: () => act("fail", { a, b }) }, "Fail"),
        el("button", { id: "button-restore", onclick: () => act("restore", { a, b }) }, "Restore"),
      );
    }
  } else if (selection.kind === "switch") {
    const view = (live.update && live.update.switches[selection.id]) || {};
    text.textContent = `switch ${selection.id}: ${view.role ?? "?"}, ${view.in_service ? "in service" : "not in service"}`;
    if (!rebuild) return;
    if (live.layout.can_restart) {
      buttons.append(el("button", { id: "button-restart", onclick: () => act("restart", { switch: selection.id }) }, "Restart"));
    } else {
      buttons.append(el("span", { class: "quiet" }, "restart: this target has no switch process"));
    }
  } else {
    const agent = (live.update && live.update.agents[selection.id]) || {};
    text.textContent = `host ${selection.id}: agent ${agent.ok ? "answering" : `not answering (${agent.error})`}`;
  }
}

function showEvents(events) {
  const list = document.getElementById("events");
  list.replaceChildren();
  for (const event of [...events].reverse()) {
    const time = (event.ts || "").slice(11, 23);
    const fields = Object.entries(event)
      .filter(([key]) => !["ts", "mono", "event"].includes(key))
      .map(([key, value]) => `${key}=${typeof value === "object" ? JSON.stringify(value) : value}`)
      .join(" ");
    list.append(el("li", { class: event.event }, `${time} ${event.event} ${fields}`));
  }
}

function sparkline(history) {
  const width = 400, height = 28;
  const top = Math.max(...history, 1);
  const step = history.length > 1 ? width / (history.length - 1) : width;
  const points = history.map((v, i) => `${(i * step).toFixed(1)},${(height - (v / top) * (height - 2) - 1).toFixed(1)}`).join(" ");
  const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
  svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
  svg.setAttribute("preserveAspectRatio", "none");
  svg.setAttribute("class", "spark");
  const line = document.createElementNS("http://www.w3.org/2000/svg", "polyline");
  line.setAttribute("points", points);
  line.setAttribute("fill", "none");
  line.setAttribute("stroke", "#2f5d8a");
  line.setAttribute("stroke-width", "1.5");
  svg.append(line);
  return svg;
}

function evGrid(evs, connection) {
  const grid = el("div", { class: "evgrid" });
  for (const [state, losses, trims, echoes, uses, plane, value, home] of evs) {
    let classes = `ev s${state >= 0 ? state : "x"}`;
    if (!home) classes += " standin";
    if (losses) classes += " lossy";
    else if (trims) classes += " trimmed";
    else if (echoes) classes += " marked";
    const name = `EV 0x${value.toString(16).padStart(8, "0")} plane ${plane}${home ? "" : " (stand-in)"}`;
    if (live.hover && live.hover.key === connection.key && live.hover.ev === value) classes += " hovered";
    grid.append(el("div", {
      class: classes,
      "data-key": connection.key,
      "data-host": connection.host,
      "data-qp": connection.qp,
      "data-ev": value,
      "data-plane": plane,
      title: `${name}: ${STATE_NAMES[state] ?? "?"}; uses ${uses}, losses ${losses}, trims ${trims}, ECN echoes ${echoes}`,
    }));
  }
  return grid;
}

function connectionCard(c) {
  const states = Object.entries(c.ev_states).map(([s, n]) => `${s} ${n}`).join(", ");
  const card = el("div", { class: "transfer", "data-key": c.key },
    el("h3", {}, `${c.host}${c.peer ? ` → ${c.peer}` : ""} qp ${c.qp}: ${mbps(c.goodput_bps)}${c.active ? "" : " (idle)"}`),
    sparkline(c.history.length ? c.history : [0]),
    el("div", { class: "numbers" },
      `acked ${c.bytes_acked} B, retransmits ${c.retransmits}, trims ${c.trims}, ECN echoes ${c.ecn_echoes}, ` +
      `srtt ${c.srtt_s ? (c.srtt_s * 1e3).toFixed(2) + " ms" : "–"}`),
    el("div", { class: "numbers" }, states),
  );
  if (c.evs.length) {
    card.append(evGrid(c.evs, c));
    card.append(el("div", { class: "evlegend" },
      el("span", { class: "ev s0" }), "GOOD", el("span", { class: "ev s1" }), "SKIP",
      el("span", { class: "ev s2" }), "ASSUMED_BAD", el("span", { class: "ev s3" }), "DENIED",
      " corner: loss (black), trim (purple), ECN echo (blue)"));
  }
  return card;
}

// MB/s of 10^6 bytes, as the collective CLI prints nccl-tests' columns.
function mbytes(bytesPerS) {
  return bytesPerS === null || bytesPerS === undefined ? "–" : `${(bytesPerS / 1e6).toFixed(3)} MB/s`;
}

// A collective job: its progress from the job's own iteration records, its ranks' goodput
// summed, and the cards of its ranks' connections (folded away once it ended).
function jobCard(job, byKey) {
  const last = job.records.length ? job.records[job.records.length - 1] : null;
  const ranks = job.hosts.map((host, rank) => `${rank}:${host}`).join(" ");
  const card = el("div", { class: `job ${job.state}`, "data-job": job.id },
    el("h3", {}, `job ${job.id}: ${job.collective} of ${job.size_bytes} B over ${job.ranks} ranks (${job.transport}): ${job.state}`),
    el("div", { class: "numbers ranks" }, `ranks ${ranks}`),
    el("div", { class: "numbers iteration" },
      `iteration ${job.completed}/${job.iterations}` +
      (last ? `, last ${last.time_s.toFixed(4)} s, algbw ${mbytes(last.algbw_Bps)}, busbw ${mbytes(last.busbw_Bps)}` : "")),
  );
  if (job.summary && job.summary.time_per_iteration_s) {
    card.append(el("div", { class: "numbers" },
      `mean ${job.summary.time_per_iteration_s.toFixed(4)} s per iteration, algbw ${mbytes(job.summary.algbw_Bps)}, busbw ${mbytes(job.summary.busbw_Bps)}`));
  }
  if (job.error) card.append(el("div", { class: "error job-error" }, job.error));
  card.append(el("div", { class: "numbers" }, `goodput of its ranks ${mbps(job.goodput_bps)}, ${job.connections.length} connections`));
  card.append(sparkline(job.history.length ? job.history : [0]));
  const members = job.connections.map((key) => byKey.get(key)).filter((c) => c);
  if (members.length) {
    const box = el("details", { class: "job-connections" }, el("summary", {}, "its connections"));
    const running = job.state === "running" || job.state === "setting up";
    if (live.jobOpen.get(String(job.id)) ?? running) box.setAttribute("open", "");
    for (const c of members) box.append(connectionCard(c));
    card.append(box);
  }
  return card;
}

function showTransfers(update) {
  const box = document.getElementById("transfers");
  box.replaceChildren();
  for (const transfer of update.transfers) {
    const detail = transfer.state === "running"
      ? `${mbps(transfer.goodput_bps)}, ${transfer.bytes} B so far`
      : transfer.state === "failed" ? transfer.error : `${mbps(transfer.summary?.goodput_bps)} over ${transfer.summary?.seconds?.toFixed?.(1) ?? "?"} s`;
    box.append(el("div", { class: "quiet" }, `page transfer ${transfer.id} ${transfer.source}→${transfer.destination}: ${transfer.state}; ${detail}`));
  }
  const byKey = new Map(update.connections.map((c) => [c.key, c]));
  const inJobs = new Set();
  for (const job of update.jobs || []) {
    box.append(jobCard(job, byKey));
    for (const key of job.connections) inJobs.add(key);
  }
  const connections = update.connections.filter((c) => !inJobs.has(c.key));
  if (!connections.length && !(update.jobs || []).length) {
    box.append(el("p", { class: "quiet" }, "No transfer running."));
    return;
  }
  for (const c of connections) box.append(connectionCard(c));
}

// Hovering an EV asks the server which path it hashes to (the switches say, see paths.py) and
// draws it on the graph; leaving the transfers clears it.
function followEvHover() {
  const box = document.getElementById("transfers");
  // A click on a job's "its connections" is the user's choice, kept over the refreshes.
  box.addEventListener("click", (event) => {
    const summary = event.target.closest ? event.target.closest(".job summary") : null;
    if (!summary) return;
    live.jobOpen.set(summary.closest(".job").dataset.job, !summary.parentElement.open);
  });
  box.addEventListener("mouseover", (event) => {
    const cell = event.target.closest ? event.target.closest(".ev[data-ev]") : null;
    if (!cell) return;
    const ev = Number(cell.dataset.ev);
    if (live.hover && live.hover.key === cell.dataset.key && live.hover.ev === ev) return;
    live.hover = { key: cell.dataset.key, host: cell.dataset.host, qp: Number(cell.dataset.qp), ev, plane: Number(cell.dataset.plane), path: null };
    for (const other of box.querySelectorAll(".ev.hovered")) other.classList.remove("hovered");
    cell.classList.add("hovered");
    askPath(live.hover);
  });
  box.addEventListener("mouseleave", () => {
    live.hover = null;
    for (const other of box.querySelectorAll(".ev.hovered")) other.classList.remove("hovered");
    drawPath();
  });
}

async function askPath(hover) {
  const id = `${hover.key}/${hover.ev}`;
  const known = live.paths.get(id);
  if (known && Date.now() - known.at < PATH_KEPT_MS) {
    hover.path = known.path;
    drawPath();
    return;
  }
  drawPath();
  let path;
  try {
    const query = `host=${encodeURIComponent(hover.host)}&qp=${hover.qp}&ev=${hover.ev}`;
    const response = await fetch(withToken("api/path") + (token ? "&" : "?") + query);
    path = await response.json();
  } catch (error) {
    path = { ok: false, nodes: [], links: [], error: String(error) };
  }
  live.paths.set(id, { at: Date.now(), path });
  if (live.hover === hover) {
    hover.path = path;
    drawPath();
  }
}

function drawPath() {
  const text = document.getElementById("ev-path");
  if (!live.cy) return; // the graph is not drawn yet
  live.cy.elements(".path").removeClass("path");
  const hover = live.hover;
  if (!hover) {
    text.textContent = "Hover over an EV to see its path.";
    text.className = "quiet";
    return;
  }
  const name = `EV 0x${hover.ev.toString(16).padStart(8, "0")} (${hover.key}, plane ${hover.plane})`;
  const path = hover.path;
  if (!path) {
    text.textContent = `${name}: asking the switches…`;
    text.className = "quiet";
    return;
  }
  for (const link of path.links || []) live.cy.getElementById(link.id).addClass("path");
  for (const node of path.nodes || []) live.cy.getElementById(node).addClass("path");
  const route = (path.nodes || []).join(" → ");
  text.textContent = path.ok ? `${name}: ${route}` : `${name}: ${route ? `${route}, then ` : ""}path unknown (${path.error})`;
  text.className = path.ok ? "" : "error";
}

followEvHover();
start();
