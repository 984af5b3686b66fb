/* queenadmin dashboard: times, countdowns, the live badge, dialogs.
 *
 * - <time data-rel datetime="ISO">: "in 4 min" / "12 s ago", re-drawn every second.
 * - <time data-countdown datetime="ISO">: "1m 04s" ticking to "expired".
 * - Hovering either shows the exact UTC time and the browser's local time.
 * - #server-clock ticks from the server's time at page load (offset kept).
 * - #live-badge follows the htmx ws extension: connecting / live /
 *   reconnecting / stale since HH:MM:SS (after STALE_AFTER_MS down) / refused.
 * - Confirmations load into <dialog id="dialog"> (hx-target="#dialog-body").
 * - A .scroll-x box (a table wider than the screen) is focusable while it
 *   scrolls, so the keyboard can scroll it too.
 */
(function () {
  "use strict";

  var STALE_AFTER_MS = 30000;
  var serverOffset = 0;
  var downSince = null;
  var lastGood = null;

  function pad(n) { return (n < 10 ? "0" : "") + n; }
  function utcText(d) {
    return d.getUTCFullYear() + "-" + pad(d.getUTCMonth() + 1) + "-" + pad(d.getUTCDate()) + " " +
      pad(d.getUTCHours()) + ":" + pad(d.getUTCMinutes()) + ":" + pad(d.getUTCSeconds()) + " UTC";
  }
  function localText(d) {
    var tz = "";
    try { tz = Intl.DateTimeFormat().resolvedOptions().timeZone || ""; } catch (e) { /* old browser */ }
    return d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()) + " " +
      pad(d.getHours()) + ":" + pad(d.getMinutes()) + ":" + pad(d.getSeconds()) + (tz ? " " + tz : " local");
  }
  function hhmmss(d) { return pad(d.getUTCHours()) + ":" + pad(d.getUTCMinutes()) + ":" + pad(d.getUTCSeconds()); }
  function now() { return Date.now() + serverOffset; }

  function relative(ms) {
    var future = ms > 0, s = Math.abs(ms) / 1000, text;
    if (s < 1) return "now";
    if (s < 60) text = Math.floor(s) + " s";
    else if (s < 3600) text = Math.floor(s / 60) + " min";
    else if (s < 86400) text = Math.floor(s / 3600) + " h " + Math.floor((s % 3600) / 60) + " min";
    else text = Math.floor(s / 86400) + " d " + Math.floor((s % 86400) / 3600) + " h";
    return future ? "in " + text : text + " ago";
  }
  function countdownText(ms) {
    if (ms <= 0) return "expired";
    var s = Math.ceil(ms / 1000);
    if (s < 60) return s + "s";
    if (s < 3600) return Math.floor(s / 60) + "m " + pad(s % 60) + "s";
    if (s < 86400) return Math.floor(s / 3600) + "h " + pad(Math.floor((s % 3600) / 60)) + "m";
    return Math.floor(s / 86400) + "d " + Math.floor((s % 86400) / 3600) + "h";
  }

  // A box whose table is wider than the screen is focusable (a keyboard
  // can scroll it) and says so: data-scrolls shows the cue in the CSS.
  function markScrollers() {
    document.querySelectorAll(".scroll-x").forEach(function (box) {
      var scrolls = box.scrollWidth > box.clientWidth + 1;
      if (scrolls && !box.hasAttribute("tabindex")) box.setAttribute("tabindex", "0");
      else if (!scrolls && box.getAttribute("tabindex") === "0") box.removeAttribute("tabindex");
      if (scrolls !== box.hasAttribute("data-scrolls")) box.toggleAttribute("data-scrolls", scrolls);
    });
  }

  // On a phone a table becomes cards (queenadmin.css): a row a card, its
  // first cell the title, every other cell under its column's name. The
  // names come from the table's head, copied to each cell as data-label;
  // roles keep the table a table for screen readers once the CSS makes
  // its parts blocks. A table whose head spans columns stays a table.
  function labelCells(table) {
    var heads = table.tHead ? table.tHead.rows : [];
    if (heads.length !== 1) return;
    var names = [];
    for (var i = 0; i < heads[0].cells.length; i++) {
      var th = heads[0].cells[i];
      if (th.colSpan !== 1) return;
      names.push(th.textContent.replace(/\s+/g, " ").trim());
    }
    if (!table.classList.contains("cards")) {
      table.setAttribute("role", "table");
      table.tHead.setAttribute("role", "rowgroup");
      heads[0].setAttribute("role", "row");
      for (var h = 0; h < heads[0].cells.length; h++) heads[0].cells[h].setAttribute("role", "columnheader");
      table.classList.add("cards");
    }
    for (var b = 0; b < table.tBodies.length; b++) {
      var body = table.tBodies[b];
      body.setAttribute("role", "rowgroup");
      for (var r = 0; r < body.rows.length; r++) {
        var row = body.rows[r];
        row.setAttribute("role", "row");
        var whole = row.cells.length === 1 && row.cells[0].colSpan > 1;
        for (var c = 0; c < row.cells.length; c++) {
          var cell = row.cells[c];
          if (cell.hasAttribute("data-label")) continue;
          cell.setAttribute("role", cell.tagName === "TH" ? "rowheader" : "cell");
          cell.setAttribute("data-label", whole ? "" : names[c] || "");
        }
      }
    }
  }
  function makeCards() {
    document.querySelectorAll("table.grid").forEach(labelCells);
  }

  function tick() {
    var t = now();
    markScrollers();
    var clock = document.getElementById("server-clock");
    if (clock) clock.textContent = hhmmss(new Date(t));
    document.querySelectorAll("time[data-rel]").forEach(function (el) {
      var at = Date.parse(el.getAttribute("datetime"));
      if (!isNaN(at)) el.textContent = relative(at - t);
    });
    document.querySelectorAll("time[data-local]:not([data-done])").forEach(function (el) {
      var at = new Date(el.getAttribute("datetime"));
      if (isNaN(at.getTime())) return;
      var sameDay = at.toDateString() === new Date().toDateString();
      el.textContent = (sameDay ? "" : at.getFullYear() + "-" + pad(at.getMonth() + 1) + "-" + pad(at.getDate()) + " ") +
        pad(at.getHours()) + ":" + pad(at.getMinutes()) + ":" + pad(at.getSeconds()) + " local";
      el.dataset.done = "1";
    });
    document.querySelectorAll("time[data-countdown]").forEach(function (el) {
      var at = Date.parse(el.getAttribute("datetime"));
      if (isNaN(at)) return;
      var left = at - t;
      var span = parseInt(el.dataset.spanMs || "", 10);
      var warn = isNaN(span) ? 10000 : Math.max(3000, span / 4);
      el.textContent = countdownText(left);
      el.classList.toggle("expiring", left > 0 && left < warn);
      el.classList.toggle("expired", left <= 0);
      var row = el.closest("tr");
      if (row) {
        row.classList.toggle("is-expired", left <= 0);
        var pill = row.querySelector("[data-lease-state]");
        if (pill) {
          var state = left <= 0 ? "expired" : left < warn ? "expiring" : "held";
          pill.className = "state state-" + state;
          pill.textContent = state;
        }
      }
    });
    if (downSince !== null && t - downSince > STALE_AFTER_MS) {
      setBadge("stale", "stale since " + hhmmss(new Date(lastGood || downSince)) + " UTC");
    }
  }

  // Exact times on hover, computed when asked (a title per tick would churn).
  document.addEventListener("mouseover", function (event) {
    var el = event.target.closest && event.target.closest("time[datetime]");
    if (!el || el.id === "server-clock") return;
    var at = new Date(el.getAttribute("datetime"));
    if (!isNaN(at.getTime())) el.title = utcText(at) + "\n" + localText(at) + " (your browser)";
  });

  // ---- the live badge --------------------------------------------------
  function setBadge(state, text) {
    var badge = document.getElementById("live-badge");
    if (!badge) return;
    badge.dataset.state = state;
    badge.textContent = text;
  }
  document.addEventListener("htmx:wsConnecting", function () {
    if (downSince === null) setBadge("connecting", "connecting…");
  });
  document.addEventListener("htmx:wsOpen", function () {
    downSince = null;
    lastGood = Date.now() + serverOffset;
    setBadge("live", "live");
  });
  document.addEventListener("htmx:wsAfterMessage", function () {
    lastGood = Date.now() + serverOffset;
    makeCards();
    tick();  // draw new times at once, not at the next second
  });
  document.addEventListener("htmx:afterSettle", function () { makeCards(); markScrollers(); tick(); });
  document.addEventListener("htmx:wsClose", function (event) {
    var code = event.detail && event.detail.event ? event.detail.event.code : 0;
    if (code >= 4400 && code < 4500) {
      // The server refused this socket (signed out, or no permission): no retry.
      downSince = null;
      setBadge("refused", code === 4401 ? "signed out: reload" : "not allowed: reload");
      return;
    }
    if (downSince === null) downSince = Date.now() + serverOffset;
    setBadge("reconnecting", "reconnecting…");
  });
  document.addEventListener("click", function (event) {
    var badge = event.target.closest && event.target.closest("#live-badge");
    if (badge && (badge.dataset.state === "stale" || badge.dataset.state === "refused")) window.location.reload();
  });

  // A pushed region marked data-hold-while-used is not swapped while the
  // operator is using it (a field has focus, boxes are ticked, a
  // confirmation is open): the push would throw their work away. The next
  // push after they are done brings it up to date.
  function inUse(el) {
    if (!el || !el.hasAttribute || !el.hasAttribute("data-hold-while-used")) return false;
    var active = document.activeElement;
    if (active && active !== document.body && el.contains(active) && active.matches("input, select, textarea")) return true;
    return !!el.querySelector("input[type=checkbox]:checked, details[open]");
  }
  document.addEventListener("htmx:oobBeforeSwap", function (event) {
    var target = event.detail && event.detail.target;
    if (inUse(target)) {
      event.detail.shouldSwap = false;
      event.preventDefault();
    }
  });

  // A "select all" box (data-select-all="<name>") ticks or clears every box
  // of that name in its form, and shows whether some, all or none are.
  document.addEventListener("change", function (event) {
    var box = event.target;
    if (!box || !box.form || box.type !== "checkbox") return;
    var name = box.dataset.selectAll || box.name;
    var head = box.form.querySelector('input[data-select-all="' + name + '"]');
    if (!head) return;
    var boxes = Array.prototype.slice.call(box.form.querySelectorAll('input[type=checkbox][name="' + name + '"]'));
    if (box === head) boxes.forEach(function (b) { b.checked = head.checked; });
    var ticked = boxes.filter(function (b) { return b.checked; }).length;
    head.checked = ticked > 0 && ticked === boxes.length;
    head.indeterminate = ticked > 0 && ticked < boxes.length;
  });

  // ---- dialogs and notices ---------------------------------------------
  function dialog() { return document.getElementById("dialog"); }
  document.addEventListener("htmx:afterSwap", function (event) {
    var d = dialog();
    if (d && event.target && event.target.id === "dialog-body" && !d.open) d.showModal();
    if (d && d.open) {
      var first = d.querySelector("[autofocus], textarea, input:not([type=hidden])");
      if (first && event.target.id === "dialog-body") first.focus();
    }
  });
  document.addEventListener("click", function (event) {
    var closer = event.target.closest && event.target.closest("[data-close-dialog]");
    if (closer) {
      event.preventDefault();
      var d = dialog();
      if (d && d.open) d.close();
    }
  });
  // Quick values (+15m) fill a field; the operator still confirms.
  document.addEventListener("click", function (event) {
    var filler = event.target.closest && event.target.closest("[data-fill]");
    if (!filler || !filler.form) return;
    var field = filler.form.elements[filler.dataset.fill];
    if (field) { field.value = filler.dataset.value; field.focus(); }
  });
  document.addEventListener("htmx:responseError", function (event) {
    var xhr = event.detail.xhr, box = document.getElementById("notice");
    if (!box) return;
    box.textContent = xhr.status === 403
      ? "Refused (403): your account may look but not act here."
      : "The server answered " + xhr.status + ". Nothing was changed that the page does not show; reload to be sure.";
    box.hidden = false;
    setTimeout(function () { box.hidden = true; }, 8000);
  });
  document.addEventListener("htmx:sendError", function () {
    var box = document.getElementById("notice");
    if (!box) return;
    box.textContent = "The server did not answer. Check the connection badge and try again.";
    box.hidden = false;
    setTimeout(function () { box.hidden = true; }, 8000);
  });

  if (window.htmx) {
    // Set before htmx connects (at DOMContentLoaded). Reconnect soon after a
    // restart: 0.5 s, 1 s, 2 s, then every 2-4 s, jittered.
    window.htmx.config.wsReconnectDelay = function (retry) {
      var base = Math.min(500 * Math.pow(2, retry), 4000);
      return base / 2 + Math.random() * base / 2;
    };
  }

  function start() {
    var clock = document.getElementById("server-clock");
    var at = clock ? Date.parse(clock.getAttribute("datetime")) : NaN;
    if (!isNaN(at)) serverOffset = at - Date.now();
    makeCards();
    markScrollers();
    tick();
    setInterval(tick, 1000);
    window.addEventListener("resize", markScrollers);
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
