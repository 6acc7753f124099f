// partition-notify /ui: the board's live updates and cell details. Plain JS, no build step.
// The board follows the table's Server-Sent Events stream (/ui/tables/T/stream, the same
// replay-then-live stream as /v1/tables/T/stream), resuming after the event id the page
// was rendered at, so nothing committed between render and connect is missed. A partition
// of a row or column the page does not show yet adds that row or column, in the order
// and within the bounds the server renders (board.py: ROWS, COLUMNS).
"use strict";
(function () {
  const LABELS = { late: "late", recovered: "late, then done", done: "done",
    announced: "announced", expected: "expected", withdrawn: "withdrawn", absent: "—" };
  const board = document.getElementById("board");
  if (!board) return;
  const live = document.getElementById("live");
  const keys = JSON.parse(board.dataset.keys);
  const first = keys[0], rest = keys.slice(1);
  const maxRows = Number(board.dataset.maxRows), maxColumns = Number(board.dataset.maxColumns);
  const head = board.tHead.rows[0], body = board.tBodies[0];
  const parsed = new WeakMap(); // cell -> its values, parsed once

  // contract/spec.py canonical(): keys sorted, characters of _ESCAPED as %XX.
  const ESCAPED = /[\x00-\x1f"#%'*/:=?\\{[\]^\x7f]/g;
  const hex = (c) => "%" + c.charCodeAt(0).toString(16).toUpperCase().padStart(2, "0");
  function canonical(values) {
    return Object.keys(values).sort()
      .map((k) => k + "=" + String(values[k]).replace(ESCAPED, hex)).join("/");
  }
  function valuesOf(cell) {
    if (!parsed.has(cell)) parsed.set(cell, JSON.parse(cell.dataset.values));
    return parsed.get(cell);
  }
  function covers(partial, values) {
    const ks = Object.keys(partial);
    return ks.length > 0 && ks.every((k) => values[k] === partial[k]);
  }
  function setState(cell, state) {
    cell.dataset.state = state;
    cell.className = "cell " + state;
    cell.textContent = LABELS[state];
    cell.setAttribute("aria-label", cell.dataset.spec + ": " + LABELS[state]);
    cell.dataset.changedAt = Date.now(); // tests compare it with the commit's timestampMs
  }
  function each(partial, fn) {
    let hit = false;
    for (const cell of board.querySelectorAll("button.cell")) {
      if (covers(partial, valuesOf(cell))) { fn(cell); hit = true; }
    }
    return hit;
  }

  // -- new rows and columns ------------------------------------------------------------
  const columns = () => Array.from(head.cells).slice(1);
  const rows = () => Array.from(body.rows).filter((tr) => tr.dataset.row !== undefined);
  function newCell(values) {
    const td = document.createElement("td"), cell = document.createElement("button");
    cell.type = "button";
    cell.dataset.values = JSON.stringify(values);
    cell.dataset.spec = canonical(values);
    for (const k of ["event", "revision", "time", "doneEvent", "rule"]) cell.dataset[k] = "";
    setState(cell, board.dataset.expected === "1" ? "expected" : "absent");
    td.append(cell);
    return td;
  }
  function ensureRow(value) {
    const shown = rows();
    const found = shown.find((tr) => tr.dataset.row === value);
    if (found) return true;
    const before = shown.find((tr) => tr.dataset.row < value); // newest value first
    if (!before && shown.length >= maxRows) return false; // older than every row shown
    for (const tr of Array.from(body.rows)) if (tr.dataset.row === undefined) tr.remove();
    const tr = document.createElement("tr"), th = document.createElement("th");
    tr.dataset.row = value;
    th.scope = "row";
    th.textContent = value;
    tr.append(th);
    for (const col of columns()) tr.append(newCell({ [first]: value, ...JSON.parse(col.dataset.col) }));
    body.insertBefore(tr, before || null);
    if (rows().length > maxRows) rows().pop().remove();
    return true;
  }
  function ensureColumn(col) {
    const sort = canonical(col), shown = columns();
    if (shown.some((th) => th.dataset.sort === sort)) return true;
    if (shown.length === 1 && shown[0].dataset.sort === "" && rest.length) {
      dropColumn(1); // the "(all)" placeholder of a board without partitions
    }
    if (columns().length >= maxColumns) return false;
    const at = columns().findIndex((th) => th.dataset.sort > sort);
    const pos = at < 0 ? columns().length + 1 : at + 1; // index among the row's cells
    const th = document.createElement("th");
    th.scope = "col";
    th.dataset.col = JSON.stringify(col);
    th.dataset.sort = sort;
    th.textContent = rest.map((k) => k + "=" + col[k]).join("/");
    head.insertBefore(th, head.cells[pos] || null);
    for (const tr of rows()) {
      tr.insertBefore(newCell({ [first]: tr.dataset.row, ...col }), tr.cells[pos] || null);
    }
    return true;
  }
  function dropColumn(pos) {
    head.cells[pos].remove();
    for (const tr of rows()) tr.cells[pos].remove();
  }
  // Make room for a spec's row (and, for a full spec, its column); false: not on this board.
  function place(values, full) {
    if (!(first in values)) return false;
    const col = {};
    for (const k of rest) col[k] = values[k];
    return ensureRow(values[first]) && (!full || ensureColumn(col));
  }

  // -- the stream's events ---------------------------------------------------------------
  function onAdd(msg) {
    let missing = false;
    for (const p of msg.partitions || []) {
      const placed = place(p, true);
      const hit = each(p, (cell) => {
        cell.dataset.event = msg.eventId;
        cell.dataset.revision = msg.revision == null ? "" : msg.revision;
        cell.dataset.time = new Date(msg.timestamp * 1000).toISOString();
        const s = cell.dataset.state;
        if (s === "absent" || s === "expected" || s === "withdrawn") setState(cell, "announced");
      });
      missing = missing || !placed || !hit;
    }
    if (missing) document.getElementById("new-rows").hidden = false;
  }
  function onDone(msg) {
    const s = msg.partitionSpec || {};
    place(s, false);
    each(s, (cell) => {
      cell.dataset.doneEvent = msg.eventId;
      cell.dataset.rule = (msg.derivedFrom && msg.derivedFrom.rule) || "";
      setState(cell, cell.dataset.state === "late" ? "recovered" : "done");
    });
  }
  function onLate(msg) {
    const s = msg.partitionSpec || {};
    place(s, false);
    each(s, (cell) => {
      const st = cell.dataset.state;
      setState(cell, st === "done" || st === "recovered" ? "recovered" : "late");
    });
  }
  // A withdrawal took the cells back; a retracted derived set-done leaves them announced.
  function onWithdrawn(msg) {
    place(msg.partitionSpec || {}, false);
    each(msg.partitionSpec || {}, (cell) => { delete cell.dataset.doneEvent; setState(cell, "withdrawn"); });
  }
  function onRetracted(msg) {
    each(msg.partitionSpec || {}, (cell) => {
      const s = cell.dataset.state;
      if (s === "done" || s === "recovered") setState(cell, cell.dataset.event ? "announced" : "absent");
    });
  }
  const handlers = { ADD_PARTITION: onAdd, PARTITION_DONE: onDone, PARTITION_LATE: onLate,
    PARTITION_WITHDRAWN: onWithdrawn, PARTITION_DONE_RETRACTED: onRetracted,
    PARTITION_LATE_RECOVERED: (msg) => each(msg.partitionSpec || {}, (c) => setState(c, "recovered")) };

  const url = "/ui/tables/" + encodeURIComponent(board.dataset.table) +
    "/stream?last_event_id=" + encodeURIComponent(board.dataset.cursor);
  const source = new EventSource(url);
  source.onopen = () => { live.textContent = "live"; board.dataset.live = "1"; };
  source.onerror = () => {
    // CLOSED: the server refused the resume (410: events after the board's last one
    // were purged), so the browser will not retry; only a fresh page is whole again.
    live.textContent = source.readyState === EventSource.CLOSED
      ? "stopped: reload the page" : "reconnecting…";
    board.dataset.live = "0";
  };
  for (const [type, fn] of Object.entries(handlers)) {
    source.addEventListener(type, (ev) => {
      fn(JSON.parse(ev.data));
      board.dataset.lastEvent = ev.lastEventId;
    });
  }

  // -- a cell's details (click, or Enter/Space on the focused cell) -----------------------
  const details = document.getElementById("details");
  function show(cell) {
    const tableRef = encodeURIComponent(board.dataset.table);
    const link = (id) => {
      if (!id) return document.createTextNode("—");
      const a = document.createElement("a");
      a.href = "/ui/tables/" + tableRef + "/events/" + id + ".json";
      a.textContent = id;
      return a;
    };
    document.getElementById("d-spec").textContent = cell.dataset.spec;
    document.getElementById("d-state").textContent = LABELS[cell.dataset.state];
    document.getElementById("d-event").replaceChildren(link(cell.dataset.event));
    document.getElementById("d-revision").textContent = cell.dataset.revision || "—";
    document.getElementById("d-time").textContent = cell.dataset.time || "—";
    document.getElementById("d-done").replaceChildren(link(cell.dataset.doneEvent));
    document.getElementById("d-rule").textContent = cell.dataset.rule || "—";
    details.hidden = false;
  }
  // Delegated: rows and columns added live get it too.
  board.addEventListener("click", (ev) => {
    const cell = ev.target.closest("button.cell");
    if (cell) show(cell);
  });

  // -- keyboard: one Tab stop for the whole board, arrow keys inside it -------------------
  // (a roving tabindex: 560 buttons would otherwise be 560 Tab presses to get past).
  const MOVES = { ArrowLeft: [0, -1], ArrowRight: [0, 1], ArrowUp: [-1, 0], ArrowDown: [1, 0] };
  function grid() {
    return rows().map((tr) => Array.from(tr.querySelectorAll("button.cell")));
  }
  function rove(target) {
    for (const c of board.querySelectorAll("button.cell")) c.tabIndex = c === target ? 0 : -1;
  }
  board.addEventListener("keydown", (ev) => {
    const cell = ev.target.closest("button.cell");
    if (!cell) return;
    const g = grid(), r = g.findIndex((row) => row.includes(cell)), c = g[r].indexOf(cell);
    let next = null;
    if (ev.key in MOVES) {
      const [dr, dc] = MOVES[ev.key];
      next = (g[r + dr] || [])[c + dc];
    } else if (ev.key === "Home") next = g[r][0];
    else if (ev.key === "End") next = g[r][g[r].length - 1];
    if (!next) return;
    ev.preventDefault();
    rove(next);
    next.focus();
  });
  board.addEventListener("focusin", (ev) => {
    if (ev.target.matches("button.cell")) rove(ev.target);
  });
  // Cells added live join with tabindex -1 (MutationObserver: no hook in each creator).
  new MutationObserver(() => {
    const all = board.querySelectorAll("button.cell");
    if (!Array.from(all).some((c) => c.tabIndex === 0) && all.length) rove(all[0]);
    else for (const c of all) if (!c.hasAttribute("tabindex")) c.tabIndex = -1;
  }).observe(body, { childList: true, subtree: true });
  const start = board.querySelector("button.cell");
  if (start) rove(start);
})();
