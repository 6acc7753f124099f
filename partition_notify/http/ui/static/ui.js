// partition-notify /ui: the board's live updates and cell details. Plain JS, no build step.
// The board follows the table's Server-Sent Events stream (/ui/tables/T/stream, the same
// replay-then-live stream as /v1/tables/T/stream), resuming after the event id the page
// was rendered at, so nothing committed between render and connect is missed.
"use strict";
(function () {
  const LABELS = { late: "late", recovered: "late, then done", done: "done",
    announced: "announced", expected: "expected", absent: "—" };
  const board = document.getElementById("board");
  if (!board) return;
  const cells = Array.from(board.querySelectorAll("button.cell"));
  const live = document.getElementById("live");

  function covers(partial, values) {
    const keys = Object.keys(partial);
    return keys.length > 0 && keys.every((k) => values[k] === partial[k]);
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
    for (const cell of cells) {
      if (covers(partial, JSON.parse(cell.dataset.values))) { fn(cell); hit = true; }
    }
    return hit;
  }
  function onAdd(msg) {
    let missing = false;
    for (const p of msg.partitions || []) {
      const hit = each(p, (cell) => {
        cell.dataset.event = msg.eventId;
        cell.dataset.revision = msg.revision == null ? "" : msg.revision;
        cell.dataset.time = new Date(msg.timestamp * 1000).toISOString();
        const s = cell.dataset.state;
        if (s === "absent" || s === "expected") setState(cell, "announced");
      });
      missing = missing || !hit;
    }
    if (missing) document.getElementById("new-rows").hidden = false;
  }
  function onDone(msg) {
    each(msg.partitionSpec || {}, (cell) => {
      cell.dataset.doneEvent = msg.eventId;
      setState(cell, cell.dataset.state === "late" ? "recovered" : "done");
    });
  }
  function onLate(msg) {
    each(msg.partitionSpec || {}, (cell) => {
      const s = cell.dataset.state;
      setState(cell, s === "done" || s === "recovered" ? "recovered" : "late");
    });
  }
  const handlers = { ADD_PARTITION: onAdd, PARTITION_DONE: onDone, PARTITION_LATE: onLate,
    PARTITION_LATE_RECOVERED: (msg) => each(msg.partitionSpec || {}, (c) => setState(c, "recovered")) };

  const url = "/ui/tables/" + encodeURIComponent(board.dataset.table) +
    "/stream?last_event_id=" + encodeURIComponent(board.dataset.cursor);
  const source = new EventSource(url);
  source.onopen = () => { live.textContent = "live"; board.dataset.live = "1"; };
  source.onerror = () => { live.textContent = "reconnecting…"; board.dataset.live = "0"; };
  for (const [type, fn] of Object.entries(handlers)) {
    source.addEventListener(type, (ev) => {
      fn(JSON.parse(ev.data));
      board.dataset.lastEvent = ev.lastEventId;
    });
  }

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
    details.hidden = false;
  }
  for (const cell of cells) cell.addEventListener("click", () => show(cell));
})();
