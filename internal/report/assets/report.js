(function () {
  "use strict";
  // Everything shown here that came from an eval (names, answers, logs,
  // transcripts) is untrusted: it reaches the page only through
  // textContent, never as markup.
  var PAGE = 500, LONG = 1500;
  var rows = JSON.parse(document.getElementById("rows").textContent);
  rows.forEach(function (r, i) { r.i = i; r.tok = (r.in || 0) + (r.o || 0); });

  var q = document.getElementById("q"), fs = document.getElementById("fstatus"), ft = document.getElementById("ftask");
  var tbody = document.getElementById("arows"), more = document.getElementById("more"), shown = document.getElementById("shown");
  var sortKey = "i", sortDir = 1, limit = PAGE, open = {};

  // safe drops characters that reorder or hide text (bidirectional
  // controls, other control characters but newline and tab).
  var INVISIBLE = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;
  function safe(s) { return String(s).replace(INVISIBLE, ""); }
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = safe(text);
    return e;
  }
  function fmtDur(ms) {
    if (!ms && ms !== 0) return "";
    if (ms < 1000) return ms + "ms";
    var s = ms / 1000;
    if (s < 60) return s.toFixed(1) + "s";
    var m = Math.floor(s / 60);
    if (m < 60) return m + "m" + String(Math.floor(s % 60)).padStart(2, "0") + "s";
    return Math.floor(m / 60) + "h" + String(m % 60).padStart(2, "0") + "m";
  }
  function fmtCount(n) {
    n = n || 0;
    if (n < 1000) return String(n);
    if (n < 1e6) return (n / 1e3).toFixed(1).replace(/\.0$/, "") + "k";
    return (n / 1e6).toFixed(1).replace(/\.0$/, "") + "M";
  }
  function fmtUSD(v) { return "$" + (v || 0).toFixed(4); }
  function fmtScore(s) { return s === null || s === undefined ? "" : s.toFixed(2); }

  function matches(r, text, st, task) {
    if (task && r.t !== task) return false;
    if (st === "reused") { if (!r.c) return false; }
    else if (st && r.st !== st) return false;
    if (text) {
      var hay = (r.t + "\n" + r.s + "\n" + (r.r || "") + "\n" + r.st).toLowerCase();
      if (hay.indexOf(text) < 0) return false;
    }
    return true;
  }
  function cmp(a, b) {
    var x = a[sortKey], y = b[sortKey];
    if (x === null || x === undefined) x = -Infinity;
    if (y === null || y === undefined) y = -Infinity;
    if (x < y) return -sortDir;
    if (x > y) return sortDir;
    return a.i - b.i;
  }

  function render() {
    var text = q.value.trim().toLowerCase(), st = fs.value, task = ft.value;
    var list = rows.filter(function (r) { return matches(r, text, st, task); });
    list.sort(cmp);
    while (tbody.firstChild) tbody.removeChild(tbody.firstChild);
    var n = Math.min(limit, list.length);
    for (var k = 0; k < n; k++) {
      var r = list[k];
      var tr = el("tr", "row");
      tr.dataset.i = r.i;
      tr.appendChild(el("td", "num", r.i + 1));
      tr.appendChild(el("td", "task", r.t));
      tr.appendChild(el("td", "sample", r.s));
      tr.appendChild(el("td", "num", r.a));
      var std = el("td", "st st-" + r.st, r.st);
      if (r.c) std.appendChild(el("span", "reused", " (reused)"));
      tr.appendChild(std);
      tr.appendChild(el("td", "num", fmtScore(r.sc)));
      tr.appendChild(el("td", "num", fmtDur(r.d)));
      tr.appendChild(el("td", "num", fmtCount(r.in) + " in / " + fmtCount(r.o) + " out"));
      tr.appendChild(el("td", "num", fmtUSD(r.u)));
      tr.appendChild(el("td", "num", r.n || ""));
      var rc = el("td", "reason", r.r || "");
      rc.title = r.r || "";
      tr.appendChild(rc);
      tr.addEventListener("click", toggle);
      tbody.appendChild(tr);
      if (open[r.i]) { tr.classList.add("open"); tbody.appendChild(detailRow(r.i)); }
    }
    shown.textContent = list.length === rows.length ? rows.length + " attempts" : list.length + " of " + rows.length + " attempts";
    more.hidden = list.length <= n;
    more.textContent = "show " + Math.min(PAGE, list.length - n) + " more (" + (list.length - n) + " hidden)";
    saveState();
  }

  function toggle(ev) {
    var tr = ev.currentTarget, i = +tr.dataset.i;
    if (open[i]) {
      delete open[i];
      tr.classList.remove("open");
      var next = tr.nextSibling;
      if (next && next.classList.contains("detail-row")) tbody.removeChild(next);
    } else {
      open[i] = true;
      tr.classList.add("open");
      tbody.insertBefore(detailRow(i), tr.nextSibling);
    }
    saveState();
  }

  function detailRow(i) {
    var tr = el("tr", "detail-row");
    var td = el("td", "detail");
    td.colSpan = 11;
    tr.appendChild(td);
    var node = document.getElementById("d-" + i);
    var d;
    try { d = JSON.parse(node.textContent); } catch (e) { td.appendChild(el("p", "trunc", "details unreadable: " + e)); return tr; }
    renderDetail(td, d);
    return tr;
  }

  function kv(parent, pairs) {
    var dl = el("dl", "kv");
    pairs.forEach(function (p) {
      if (p[1] === undefined || p[1] === null || p[1] === "") return;
      dl.appendChild(el("dt", null, p[0]));
      dl.appendChild(el("dd", null, p[1]));
    });
    if (dl.firstChild) parent.appendChild(dl);
  }

  // longText shows s in a <pre>, collapsed past LONG characters.
  function longText(parent, s, cls) {
    s = safe(s);
    var pre = el("pre", cls);
    if (s.length <= LONG) { pre.textContent = s; parent.appendChild(pre); return; }
    pre.textContent = s.slice(0, LONG) + "…";
    parent.appendChild(pre);
    var b = el("button", "expand", "show all " + s.length + " characters");
    b.type = "button";
    b.addEventListener("click", function (ev) { ev.stopPropagation(); pre.textContent = s; b.remove(); });
    parent.appendChild(b);
  }

  function section(parent, title) {
    parent.appendChild(el("div", "sect", title));
  }

  function renderDetail(td, d) {
    td.appendChild(el("h3", null, d.task + " / " + d.sample + " #" + d.attempt + " · " + d.status));
    var parts = d.parts ? Object.keys(d.parts).sort().map(function (k) { return k + " " + d.parts[k]; }).join("\n") : "";
    kv(td, [["source", d.source], ["run", d.run_id], ["carried from", d.carried_from ? "run " + d.carried_from : ""],
      ["fingerprint", d.fingerprint], ["fingerprint parts", parts]]);
    if (d.reason) { section(td, "reason"); longText(td, d.reason); }
    if (d.answer) { section(td, "answer"); longText(td, d.answer); }
    if (d.explanation) { section(td, "scorer explanation"); longText(td, d.explanation); }
    if (d.transcript) {
      renderTranscript(td, d.transcript, d.carried_from);
    } else if (d.transcript_error) {
      td.appendChild(el("p", "trunc", "transcript unreadable: " + d.transcript_error));
    } else {
      td.appendChild(el("p", "k", "no transcript captured for this attempt"));
    }
    if (d.artifacts && d.artifacts.length) renderArtifacts(td, d.artifacts);
    if (d.log) { section(td, "agent and scorer log"); longText(td, d.log, "log"); }
  }

  function renderArtifacts(parent, arts) {
    var box = el("div", "artifacts");
    section(box, "artifacts · " + arts.length + " file" + (arts.length === 1 ? "" : "s"));
    arts.forEach(function (a) {
      var det = el("details", "artifact");
      det.appendChild(el("summary", null, a.path + " · " + fmtCount(a.size) + " bytes" + (a.note ? " · " + a.note : "") + (a.binary ? " · binary, not shown" : "")));
      det.addEventListener("toggle", function () {
        if (!det.open || det.dataset.done) return;
        det.dataset.done = "1";
        if (a.text !== undefined && a.text !== "") longText(det, a.text);
        else det.appendChild(el("p", "k", a.note || (a.binary ? "binary file: not shown" : "empty file")));
      });
      box.appendChild(det);
    });
    parent.appendChild(box);
  }

  function renderTranscript(parent, t, carried) {
    var box = el("div", "transcript");
    var head = "transcript · " + (t.calls || []).length + " model call" + ((t.calls || []).length === 1 ? "" : "s") + " · " + t.mode;
    if (carried) head += " · from run " + carried;
    section(box, head);
    if (t.truncated) box.appendChild(el("p", "trunc", "truncated: " + t.truncated));
    if (t.dropped) box.appendChild(el("p", "trunc", t.dropped + " later calls not kept"));
    (t.calls || []).forEach(function (c, k) { box.appendChild(renderCall(c, k)); });
    parent.appendChild(box);
  }

  function renderCall(c, k) {
    var det = el("details", "call");
    var tries = (c.tries || []).length;
    var sum = "#" + (k + 1) + (c.by === "scorer" ? " [grader]" : "") + " " + c.method + " " + c.route + (c.model ? " · " + c.model : "") + " · " + c.status +
      " · " + fmtDur(Math.round((c.latency_ns || 0) / 1e6)) + " · " + fmtCount(c.input_tokens) + " in / " + fmtCount(c.output_tokens) +
      " out · " + fmtUSD(c.cost_usd) + (c.stream ? " · stream" : "") + (tries > 1 ? " · " + (tries - 1) + " retr" + (tries === 2 ? "y" : "ies") : "") +
      (c.truncated ? " · truncated" : "");
    det.appendChild(el("summary", null, sum));
    var body = el("div");
    det.appendChild(body);
    var filled = false;
    det.addEventListener("toggle", function () {
      if (!det.open || filled) return;
      filled = true;
      fillCall(body, c);
    });
    return det;
  }

  function fillCall(body, c) {
    kv(body, [["time", c.time]]);
    if ((c.tries || []).length > 1 || (c.tries || []).some(function (t) { return t.error; })) {
      section(body, "upstream tries");
      var tb = el("table", "tries");
      var h = el("tr");
      ["try", "waited", "status", "latency", "error"].forEach(function (x) { h.appendChild(el("th", null, x)); });
      tb.appendChild(h);
      c.tries.forEach(function (t, i) {
        var tr = el("tr");
        tr.appendChild(el("td", "num", i + 1));
        tr.appendChild(el("td", "num", fmtDur(Math.round((t.wait_ns || 0) / 1e6))));
        tr.appendChild(el("td", "num", t.status || "–"));
        tr.appendChild(el("td", "num", fmtDur(Math.round((t.latency_ns || 0) / 1e6))));
        tr.appendChild(el("td", null, t.error || ""));
        tb.appendChild(tr);
      });
      body.appendChild(tb);
    }
    if (c.truncated) body.appendChild(el("p", "trunc", "content of this call truncated or left out (capture cap)"));
    var req = c.request, resp = c.response;
    if (req && typeof req === "object") {
      section(body, "request");
      renderRequest(body, req);
    }
    if (resp !== undefined && resp !== null) {
      section(body, "response");
      renderResponse(body, resp);
    } else if (c.response_text) {
      section(body, "response");
      longText(body, c.response_text);
    }
    if (req || resp) {
      var raw = el("details", "raw");
      raw.appendChild(el("summary", null, "raw JSON"));
      raw.addEventListener("toggle", function () {
        if (!raw.open || raw.dataset.done) return;
        raw.dataset.done = "1";
        if (req) { raw.appendChild(el("div", "k", "request")); longText(raw, JSON.stringify(req, null, 2)); }
        if (resp) { raw.appendChild(el("div", "k", "response")); longText(raw, JSON.stringify(resp, null, 2)); }
      });
      body.appendChild(raw);
    }
  }

  function str(v) { return typeof v === "string" ? v : JSON.stringify(v, null, 2); }

  function message(parent, role, content, extra) {
    var m = el("div", "msg " + String(role).replace(/[^a-z_]/g, ""));
    m.appendChild(el("div", "role", role + (extra ? " · " + extra : "")));
    renderContent(m, content);
    parent.appendChild(m);
    return m;
  }

  function toolBox(parent, title, body) {
    var b = el("div", "tool");
    b.appendChild(el("div", "role", title));
    var s = body;
    if (typeof s === "string") { try { s = JSON.stringify(JSON.parse(s), null, 2); } catch (e) { /* not JSON: as sent */ } }
    else s = JSON.stringify(s, null, 2);
    longText(b, s);
    parent.appendChild(b);
  }

  // renderContent draws a message's content: a string, or a list of parts
  // (OpenAI content parts, Anthropic blocks, Responses items).
  function renderContent(parent, content) {
    if (content === null || content === undefined) return;
    if (typeof content === "string") { longText(parent, content); return; }
    if (!Array.isArray(content)) { longText(parent, str(content)); return; }
    content.forEach(function (p) {
      if (typeof p === "string") { longText(parent, p); return; }
      if (!p || typeof p !== "object") return;
      switch (p.type) {
        case "text": case "input_text": case "output_text":
          longText(parent, p.text); break;
        case "tool_use":
          toolBox(parent, "tool call " + p.name + (p.id ? " (" + p.id + ")" : ""), p.input); break;
        case "tool_result":
          var b = el("div", "tool");
          b.appendChild(el("div", "role", "tool result" + (p.tool_use_id ? " (" + p.tool_use_id + ")" : "") + (p.is_error ? " · error" : "")));
          renderContent(b, p.content);
          parent.appendChild(b); break;
        case "thinking":
          longText(parent, "[thinking] " + (p.thinking || "")); break;
        case "image_url": case "image": case "input_image":
          parent.appendChild(el("p", "k", "[image not shown]")); break;
        default:
          longText(parent, str(p));
      }
    });
  }

  function openaiMessage(parent, m) {
    var extra = m.name ? m.name : (m.tool_call_id ? "result of " + m.tool_call_id : "");
    var box = message(parent, m.role || "?", m.content, extra);
    (m.tool_calls || []).forEach(function (tc) {
      var f = tc.function || {};
      toolBox(box, "tool call " + (f.name || tc.type || "") + (tc.id ? " (" + tc.id + ")" : ""), f.arguments !== undefined ? f.arguments : tc);
    });
    if (m.refusal) box.appendChild(el("p", "trunc", "refusal: " + m.refusal));
  }

  function renderRequest(parent, req) {
    if (req.system !== undefined) message(parent, "system", req.system);
    if (req.instructions) message(parent, "system", req.instructions);
    if (Array.isArray(req.messages)) req.messages.forEach(function (m) { openaiMessage(parent, m || {}); });
    if (req.input !== undefined) {
      if (typeof req.input === "string") message(parent, "user", req.input);
      else if (Array.isArray(req.input)) req.input.forEach(function (it) { responsesItem(parent, it || {}); });
      else longText(parent, str(req.input));
    }
    if (req.prompt !== undefined) message(parent, "user", req.prompt);
    if (Array.isArray(req.tools) && req.tools.length) {
      var names = req.tools.map(function (t) { return (t.function && t.function.name) || t.name || t.type || "?"; });
      var td = el("details", "tools");
      td.appendChild(el("summary", null, req.tools.length + " tool" + (req.tools.length === 1 ? "" : "s") + ": " + names.join(", ")));
      td.addEventListener("toggle", function () { if (td.open && !td.dataset.done) { td.dataset.done = "1"; longText(td, JSON.stringify(req.tools, null, 2)); } });
      parent.appendChild(td);
    }
  }

  function responsesItem(parent, it) {
    if (it.type === "function_call") toolBox(parent, "tool call " + it.name + (it.call_id ? " (" + it.call_id + ")" : ""), it.arguments);
    else if (it.type === "function_call_output") message(parent, "tool", it.output, it.call_id ? "result of " + it.call_id : "");
    else if (it.role) message(parent, it.role, it.content);
    else longText(parent, str(it));
  }

  function renderResponse(parent, r) {
    if (typeof r !== "object") { longText(parent, str(r)); return; }
    if (r.error) { parent.appendChild(el("p", "trunc", "error: " + str(r.error.message || r.error))); return; }
    if (Array.isArray(r.choices)) {
      r.choices.forEach(function (ch) {
        if (ch.message) openaiMessage(parent, ch.message);
        else if (ch.text !== undefined) message(parent, "assistant", ch.text);
        if (ch.finish_reason) parent.appendChild(el("div", "k", "finish: " + ch.finish_reason));
      });
      return;
    }
    if (r.type === "message" && Array.isArray(r.content)) {
      message(parent, r.role || "assistant", r.content);
      if (r.stop_reason) parent.appendChild(el("div", "k", "stop: " + r.stop_reason));
      return;
    }
    if (Array.isArray(r.output)) { r.output.forEach(function (it) { responsesItem(parent, it || {}); }); return; }
    longText(parent, str(r));
  }

  // Sorting and filtering.
  var ths = document.querySelectorAll("#atable th");
  ths.forEach(function (th) {
    th.addEventListener("click", function () {
      var k = th.dataset.k;
      if (sortKey === k) sortDir = -sortDir; else { sortKey = k; sortDir = 1; }
      ths.forEach(function (x) { x.classList.remove("asc", "desc"); });
      th.classList.add(sortDir > 0 ? "asc" : "desc");
      render();
    });
  });
  [q, fs, ft].forEach(function (x) { x.addEventListener("input", function () { limit = PAGE; render(); }); });
  more.addEventListener("click", function () { limit += PAGE; render(); });

  // A live page (steward view) keeps its filters and open rows across reloads.
  var live = document.querySelector('meta[name="steward-live"]');
  function saveState() {
    if (!live) return;
    try { sessionStorage.setItem("steward-view", JSON.stringify({ q: q.value, s: fs.value, t: ft.value, open: Object.keys(open), k: sortKey, d: sortDir })); } catch (e) { /* storage off */ }
  }
  if (live) {
    try {
      var st = JSON.parse(sessionStorage.getItem("steward-view") || "null");
      if (st) { q.value = st.q || ""; fs.value = st.s || ""; ft.value = st.t || ""; sortKey = st.k || "i"; sortDir = st.d || 1; (st.open || []).forEach(function (i) { if (rows[i]) open[i] = true; }); }
    } catch (e) { /* ignore */ }
    var url = live.getAttribute("content"), ver = live.dataset.version;
    setInterval(function () {
      fetch(url, { cache: "no-store" }).then(function (r) { return r.text(); }).then(function (v) {
        if (v.trim() !== ver) location.reload();
      }).catch(function () { /* the server stopped: keep the page */ });
    }, 2000);
  }
  if (location.hash && /^#a-\d+$/.test(location.hash)) open[+location.hash.slice(3)] = true;
  render();
})();
