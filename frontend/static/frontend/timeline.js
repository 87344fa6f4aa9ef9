/* PyPTO timeline viewer: a canvas that asks the server for one level-of-detail window at a time.
 *
 * Mount on an element with `data-timeline-url="/api/profiles/ID/timeline/"` (auto-mounted on load), or call
 * `PyptoTimeline.mount(element, {url})`. It uses three endpoints under that URL:
 *   GET url?start_ns=&end_ns=&width_px=   the window (pypto_core.timeline.TimelineIndex.window)
 *   GET url + "event/?lane=&idx="         one event's details and its flow links
 *   GET url + "search/?q="                events whose name contains q
 * Times are ns relative to the answer's base_ns (a string: absolute ns exceed 2**53).
 * Every name from a profile is user data: drawn with fillText or set with textContent, never as HTML.
 */
(function () {
  "use strict";

  var LABEL_W = 190, AXIS_H = 26, ROW_H = 18, GROUP_H = 18, COUNTER_H = 44, LANE_GAP = 4;
  var MARGIN = 1; // fetch one extra screen each side so that a pan draws at once

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function fmtNs(ns) {
    var a = Math.abs(ns);
    if (a >= 1e9) return (ns / 1e9).toFixed(3) + " s";
    if (a >= 1e6) return (ns / 1e6).toFixed(3) + " ms";
    if (a >= 1e3) return (ns / 1e3).toFixed(3) + " µs";
    return Math.round(ns) + " ns";
  }

  function hashColor(name, alpha) {
    var h = 0;
    for (var i = 0; i < name.length; i++) h = (h * 31 + name.charCodeAt(i)) | 0;
    return "hsla(" + (Math.abs(h) % 360) + ",55%,55%," + alpha + ")";
  }

  function niceStep(ns) {
    var p = Math.pow(10, Math.floor(Math.log10(ns)));
    var m = ns / p;
    return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
  }

  // The widget's words: English here, the page's language from <template id="tl-text" data-*> (the
  // timeline page fills it with translated text); "{n}"-style fields are filled in by fill().
  var TEXT = {
    search: "Search by name", searchLabel: "Search events by name", reset: "Reset zoom", loading: "Loading",
    help: "W/S zoom · A/D pan · wheel zoom · drag pan · click for details", canvas: "Timeline",
    hint: "Click an event to see its details.", unavailable: "Timeline unavailable:",
    eventUnavailable: "Event details unavailable:", searchFailed: "Search failed:",
    run: "A run of {n} events over {dur} (busy {busy}); zoom in to separate them. Showing the longest member:",
    lane: "Lane", start: "Start", absolute: "(absolute {ns} ns)", duration: "Duration",
    launches: "Launches kernels", launchedBy: "Launched by host ops", match: "{n} match", matches: "{n} matches",
    scale: "{span} shown · {bar}/bar"
  };

  function pageText() {
    var out = {}, src = document.getElementById("tl-text");
    Object.keys(TEXT).forEach(function (k) { out[k] = (src && src.dataset[k]) || TEXT[k]; });
    return out;
  }

  function fill(text, fields) {
    return text.replace(/\{(\w+)\}/g, function (m, k) { return k in fields ? String(fields[k]) : m; });
  }

  function Timeline(root, opts) {
    this.root = root;
    this.url = opts.url;
    this.t = pageText();
    this.seq = 0;
    this.pending = 0;
    this.data = null;         // the last window answer
    this.lanes = [];          // layout: {lane, y, h, info}
    this.view = null;         // {start, end} in relative ns
    this.selected = null;     // event details answer
    this.search = null;       // search answer
    this.matchPos = -1;
    this.build();
    this.fetchWindow(null, null);
  }

  Timeline.prototype.build = function () {
    var self = this;
    this.root.classList.add("pypto-timeline");
    this.root.textContent = "";
    var bar = el("div", "tl-toolbar");
    this.searchInput = el("input", "tl-search");
    this.searchInput.type = "search";
    this.searchInput.placeholder = this.t.search;
    this.searchInput.setAttribute("aria-label", this.t.searchLabel);
    var prev = el("button", "tl-btn tl-prev", "‹");
    var next = el("button", "tl-btn tl-next", "›");
    var reset = el("button", "tl-btn tl-reset", this.t.reset);
    prev.type = next.type = reset.type = "button";
    this.matchInfo = el("span", "tl-matches", "");
    this.status = el("span", "tl-status", "");
    this.spinner = el("span", "tl-spinner");
    this.spinner.setAttribute("role", "status");
    this.spinner.setAttribute("aria-label", this.t.loading);
    this.spinner.hidden = true;
    var help = el("span", "tl-help", this.t.help);
    bar.append(this.searchInput, prev, next, this.matchInfo, reset, this.spinner, this.status, help);
    this.scroller = el("div", "tl-scroller");
    this.canvas = el("canvas", "tl-canvas");
    this.canvas.tabIndex = 0;
    this.canvas.setAttribute("aria-label", this.t.canvas);
    this.scroller.append(this.canvas);
    this.details = el("div", "tl-details");
    this.details.append(el("div", "tl-hint", this.t.hint));
    this.root.append(bar, this.scroller, this.details);
    this.ctx = this.canvas.getContext("2d");

    this.searchInput.addEventListener("keydown", function (e) {
      if (e.key === "Enter") { e.preventDefault(); self.runSearch(self.searchInput.value); }
      e.stopPropagation();
    });
    prev.addEventListener("click", function () { self.stepMatch(-1); });
    next.addEventListener("click", function () { self.stepMatch(1); });
    reset.addEventListener("click", function () {
      if (self.data) self.setView(0, self.data.span_ns[1] + 1);
    });
    this.canvas.addEventListener("keydown", function (e) { self.onKey(e); });
    this.canvas.addEventListener("wheel", function (e) { self.onWheel(e); }, {passive: false});
    this.canvas.addEventListener("mousedown", function (e) { self.onDown(e); });
    window.addEventListener("mousemove", function (e) { self.onMove(e); });
    window.addEventListener("mouseup", function (e) { self.onUp(e); });
    window.addEventListener("resize", function () { self.layout(); self.draw(); self.scheduleFetch(); });
  };

  // ---- data -----------------------------------------------------------------------------------------
  Timeline.prototype.plotWidth = function () {
    return Math.max(100, this.scroller.clientWidth - LABEL_W);
  };

  Timeline.prototype.getJSON = function (url) {
    var self = this;
    this.pending++;
    this.spinner.hidden = false;
    return fetch(url, {credentials: "same-origin", headers: {Accept: "application/json"}})
      .then(function (r) {
        if (!r.ok) throw new Error("HTTP " + r.status);
        return r.json();
      })
      .finally(function () {
        self.pending--;
        self.spinner.hidden = self.pending === 0;
      });
  };

  Timeline.prototype.fetchWindow = function (start, end) {
    var self = this, seq = ++this.seq;
    var q = "width_px=" + Math.round(this.plotWidth() * (start === null ? 1 : 1 + 2 * MARGIN));
    if (start !== null) {
      var w = end - start;
      q += "&start_ns=" + Math.floor(start - MARGIN * w) + "&end_ns=" + Math.ceil(end + MARGIN * w);
    }
    return this.getJSON(this.url + "?" + q).then(function (answer) {
      if (seq !== self.seq) return;   // a newer window was asked for meanwhile
      self.data = answer;
      self.indexNames(answer);
      if (!self.view) self.view = {start: 0, end: answer.span_ns[1] + 1};
      self.status.textContent = "";
      self.root.dataset.ready = "1";
      self.root.dataset.nsPerPx = String(answer.ns_per_px);
      self.layout();
      self.draw();
    }).catch(function (err) {
      if (seq === self.seq) self.status.textContent = self.t.unavailable + " " + err.message;
    });
  };

  Timeline.prototype.indexNames = function (answer) {
    var q = this.search ? this.search.query.toLowerCase() : null;
    this.nameHit = answer.names.map(function (n) { return q !== null && n.toLowerCase().indexOf(q) >= 0; });
  };

  Timeline.prototype.scheduleFetch = function () {
    var self = this;
    clearTimeout(this.timer);
    this.timer = setTimeout(function () {
      if (self.view) self.fetchWindow(self.view.start, self.view.end);
    }, 60);
  };

  // ---- layout and drawing ---------------------------------------------------------------------------
  Timeline.prototype.layout = function () {
    if (!this.data) return;
    var lanes = this.data.lanes.slice().sort(function (a, b) { return a.sort - b.sort || a.id - b.id; });
    var y = AXIS_H, group = null, out = [];
    this.groups = [];
    lanes.forEach(function (info) {
      if (info.group !== group) {
        group = info.group;
        this.groups.push({name: group, y: y});
        y += GROUP_H;
      }
      var h = info.kind === "counter" ? COUNTER_H : Math.max(1, info.rows) * ROW_H;
      out.push({lane: info.id, y: y, h: h, info: info});
      y += h + LANE_GAP;
    }, this);
    this.lanes = out;
    this.laneById = {};
    out.forEach(function (l) { this.laneById[l.lane] = l; }, this);
    var dpr = window.devicePixelRatio || 1;
    var w = this.scroller.clientWidth, h = y + 8;
    this.canvas.style.width = w + "px";
    this.canvas.style.height = h + "px";
    this.canvas.width = Math.round(w * dpr);
    this.canvas.height = Math.round(h * dpr);
    this.ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    this.cssW = w;
    this.cssH = h;
  };

  Timeline.prototype.x = function (ns) {
    return LABEL_W + (ns - this.view.start) * this.plotWidth() / (this.view.end - this.view.start);
  };

  Timeline.prototype.draw = function () {
    if (!this.data || !this.view) return;
    var c = this.ctx, self = this, names = this.data.names;
    c.clearRect(0, 0, this.cssW, this.cssH);
    c.font = "11px system-ui, sans-serif";
    c.textBaseline = "middle";
    var searching = !!this.search;
    var sel = this.selected;

    this.data.tracks.forEach(function (t) {
      var lane = self.laneById[t.lane];
      if (!lane) return;
      c.save();
      c.beginPath();
      c.rect(LABEL_W, lane.y, self.plotWidth(), lane.h);
      c.clip();
      if (t.kind === "counter") self.drawCounter(t, lane);
      else {
        for (var i = 0; i < t.start.length; i++) {
          var x0 = self.x(t.start[i]), x1 = self.x(t.start[i] + t.dur[i]);
          if (x1 < LABEL_W || x0 > self.cssW) continue;
          var w = Math.max(1, x1 - x0), y = lane.y + t.depth[i] * ROW_H, name = names[t.name[i]];
          var merged = t.count[i] > 1;
          var alpha = merged ? 0.35 + 0.6 * (t.busy[i] / Math.max(1, t.dur[i])) : 0.9;
          if (searching && !self.nameHit[t.name[i]]) alpha *= 0.25;
          c.fillStyle = hashColor(name, alpha);
          c.fillRect(x0, y + 1, w, ROW_H - 2);
          if (searching && self.nameHit[t.name[i]]) {
            c.strokeStyle = "#d97706";
            c.lineWidth = 2;
            c.strokeRect(x0, y + 1, w, ROW_H - 2);
          }
          if (sel && sel.idx === t.idx[i] && !merged) {
            c.strokeStyle = "#111";
            c.lineWidth = 2;
            c.strokeRect(x0, y + 1, w, ROW_H - 2);
          }
          if (w > 36) {
            var label = merged ? name + " ×" + t.count[i] : name;
            c.fillStyle = "#111";
            c.save();
            c.beginPath();
            c.rect(x0, y, w, ROW_H);
            c.clip();
            c.fillText(label, Math.max(x0, LABEL_W) + 3, y + ROW_H / 2);
            c.restore();
          }
        }
      }
      c.restore();
    });
    this.drawMatches();
    this.drawFlows();
    this.drawLabels();
    this.drawAxis();
  };

  Timeline.prototype.drawCounter = function (t, lane) {
    var c = this.ctx, lo = Infinity, hi = -Infinity, max = t.max || t.min, i;
    for (i = 0; i < t.t.length; i++) {
      if (t.min[i] !== null && t.min[i] < lo) lo = t.min[i];
      if (max[i] !== null && max[i] > hi) hi = max[i];
    }
    if (!isFinite(lo)) return;
    if (hi === lo) { hi = lo + 1; }
    var self = this;
    function y(v) { return lane.y + lane.h - 2 - (v - lo) / (hi - lo) * (lane.h - 4); }
    c.fillStyle = "rgba(37,99,235,0.25)";
    c.strokeStyle = "rgba(37,99,235,0.9)";
    c.lineWidth = 1;
    c.beginPath();
    var started = false;
    for (i = 0; i < t.t.length; i++) {        // step line through the maxima
      if (max[i] === null) continue;
      var x = self.x(t.t[i]);
      if (!started) { c.moveTo(x, y(max[i])); started = true; }
      else c.lineTo(x, y(max[i]));
      var xn = i + 1 < t.t.length ? self.x(t.t[i + 1]) : x + 1;
      c.lineTo(xn, y(max[i]));
    }
    c.stroke();
    if (t.max) {                              // the min..max band of each pixel bucket
      for (i = 0; i < t.t.length; i++) {
        if (t.min[i] === null) continue;
        var x0 = self.x(t.t[i]);
        c.fillRect(x0, y(t.max[i]), 1, Math.max(1, y(t.min[i]) - y(t.max[i])));
      }
    }
    c.fillStyle = "#374151";
    c.fillText(String(+hi.toPrecision(4)), LABEL_W + 4, lane.y + 7);
  };

  Timeline.prototype.drawMatches = function () {
    if (!this.search) return;
    var c = this.ctx, self = this;
    c.fillStyle = "#d97706";
    this.search.matches.forEach(function (m) {
      var lane = self.laneById[m.lane];
      if (!lane) return;
      var x = self.x(m.start_ns);
      if (x < LABEL_W || x > self.cssW) return;
      c.beginPath();   // a small triangle above the lane, so even a match inside a merged run shows
      c.moveTo(x - 4, lane.y - 3);
      c.lineTo(x + 4, lane.y - 3);
      c.lineTo(x, lane.y + 3);
      c.fill();
    });
  };

  Timeline.prototype.eventBox = function (ev) {
    var lane = this.laneById[ev.lane];
    if (!lane) return null;
    var y = lane.y + (ev.depth || 0) * ROW_H + ROW_H / 2;
    return {x0: this.x(ev.start_ns), x1: this.x(ev.start_ns + ev.dur_ns), y: y};
  };

  Timeline.prototype.drawFlows = function () {
    var sel = this.selected;
    if (!sel || !sel.links || !sel.links.length) return;
    var c = this.ctx, from = this.eventBox(sel), self = this;
    if (!from) return;
    c.strokeStyle = "#dc2626";
    c.fillStyle = "#dc2626";
    c.lineWidth = 1.5;
    sel.links.forEach(function (link) {
      var to = self.eventBox(link);
      if (!to) return;
      // host op -> kernel: from the op's start to the kernel's start, as Perfetto draws async_npu flows
      var a = sel.table === "host_ops" ? {x: from.x0, y: from.y} : {x: to.x0, y: to.y};
      var b = sel.table === "host_ops" ? {x: to.x0, y: to.y} : {x: from.x0, y: from.y};
      c.beginPath();
      c.moveTo(a.x, a.y);
      c.bezierCurveTo(a.x + 30, a.y, b.x - 30, b.y, b.x, b.y);
      c.stroke();
      var ang = Math.atan2(b.y - a.y, b.x - a.x);
      c.beginPath();
      c.moveTo(b.x, b.y);
      c.lineTo(b.x - 7 * Math.cos(ang - 0.4), b.y - 7 * Math.sin(ang - 0.4));
      c.lineTo(b.x - 7 * Math.cos(ang + 0.4), b.y - 7 * Math.sin(ang + 0.4));
      c.fill();
    });
  };

  Timeline.prototype.drawLabels = function () {
    var c = this.ctx;
    c.fillStyle = "#f9fafb";
    c.fillRect(0, 0, LABEL_W, this.cssH);
    c.strokeStyle = "#d1d5db";
    c.beginPath();
    c.moveTo(LABEL_W + 0.5, 0);
    c.lineTo(LABEL_W + 0.5, this.cssH);
    c.stroke();
    c.font = "bold 11px system-ui, sans-serif";
    c.fillStyle = "#111827";
    this.groups.forEach(function (g) { c.fillText(g.name, 6, g.y + GROUP_H / 2, LABEL_W - 10); });
    c.font = "11px system-ui, sans-serif";
    c.fillStyle = "#374151";
    this.lanes.forEach(function (l) {
      c.fillText(l.info.name, 16, l.y + Math.min(l.h, ROW_H) / 2, LABEL_W - 22);
    });
  };

  Timeline.prototype.drawAxis = function () {
    var c = this.ctx, span = this.view.end - this.view.start;
    c.fillStyle = "#fff";
    c.fillRect(LABEL_W, 0, this.cssW - LABEL_W, AXIS_H);
    var step = niceStep(span / 8), first = Math.ceil(this.view.start / step) * step;
    c.strokeStyle = "#9ca3af";
    c.fillStyle = "#374151";
    c.font = "10px system-ui, sans-serif";
    for (var t = first; t <= this.view.end; t += step) {
      var x = Math.round(this.x(t)) + 0.5;
      c.beginPath();
      c.moveTo(x, AXIS_H - 6);
      c.lineTo(x, AXIS_H);
      c.stroke();
      c.fillText(fmtNs(t), x + 2, AXIS_H / 2 - 2);
    }
    c.fillStyle = "#6b7280";
    c.fillText(fill(this.t.scale, {span: fmtNs(span), bar: fmtNs(this.data.bar_ns)}), 6, AXIS_H / 2);
  };

  // ---- navigation -----------------------------------------------------------------------------------
  Timeline.prototype.setView = function (start, end) {
    var span = this.data ? this.data.span_ns[1] + 1 : end;
    var w = Math.max(50, Math.min(end - start, span * 1.2));
    start = Math.max(-span * 0.1, Math.min(start, span * 1.1 - w));
    this.view = {start: start, end: start + w};
    this.draw();
    this.scheduleFetch();
  };

  Timeline.prototype.zoom = function (factor, atX) {
    if (!this.view) return;
    var frac = atX === undefined ? 0.5 : Math.min(1, Math.max(0, (atX - LABEL_W) / this.plotWidth()));
    var w = this.view.end - this.view.start, center = this.view.start + frac * w, nw = w * factor;
    this.setView(center - frac * nw, center - frac * nw + nw);
  };

  Timeline.prototype.pan = function (fraction) {
    if (!this.view) return;
    var w = this.view.end - this.view.start;
    this.setView(this.view.start + fraction * w, this.view.end + fraction * w);
  };

  Timeline.prototype.onKey = function (e) {
    var k = e.key.toLowerCase();
    if (k === "w") this.zoom(0.5, this.mouseX);
    else if (k === "s") this.zoom(2, this.mouseX);
    else if (k === "a") this.pan(-0.2);
    else if (k === "d") this.pan(0.2);
    else return;
    e.preventDefault();
  };

  Timeline.prototype.onWheel = function (e) {
    e.preventDefault();
    var r = this.canvas.getBoundingClientRect();
    if (e.shiftKey || Math.abs(e.deltaX) > Math.abs(e.deltaY)) this.pan((e.deltaX || e.deltaY) / 1000);
    else this.zoom(Math.pow(1.0015, e.deltaY), e.clientX - r.left);
  };

  Timeline.prototype.onDown = function (e) {
    var r = this.canvas.getBoundingClientRect();
    this.drag = {x: e.clientX, start: this.view && this.view.start, end: this.view && this.view.end,
                 moved: false, px: e.clientX - r.left, py: e.clientY - r.top};
    this.canvas.focus();
  };

  Timeline.prototype.onMove = function (e) {
    var r = this.canvas.getBoundingClientRect();
    this.mouseX = e.clientX - r.left;
    if (!this.drag || !this.view) return;
    var dx = e.clientX - this.drag.x;
    if (Math.abs(dx) > 3) this.drag.moved = true;
    if (this.drag.moved) {
      var nsPerPx = (this.drag.end - this.drag.start) / this.plotWidth();
      this.setView(this.drag.start - dx * nsPerPx, this.drag.end - dx * nsPerPx);
    }
  };

  Timeline.prototype.onUp = function () {
    var d = this.drag;
    this.drag = null;
    if (d && !d.moved) this.pick(d.px, d.py);
  };

  // ---- picking, details, search ---------------------------------------------------------------------
  Timeline.prototype.hit = function (px, py) {
    if (!this.data || px < LABEL_W) return null;
    var lane = null;
    for (var i = 0; i < this.lanes.length; i++) {
      var l = this.lanes[i];
      if (py >= l.y && py < l.y + l.h) { lane = l; break; }
    }
    if (!lane || lane.info.kind !== "slices") return null;
    var depth = Math.floor((py - lane.y) / ROW_H);
    var t = null;
    this.data.tracks.forEach(function (tr) { if (tr.lane === lane.lane) t = tr; });
    if (!t) return null;
    var best = null, bestDist = 4; // px of slack so a one-pixel bar can be clicked
    for (var j = 0; j < t.start.length; j++) {
      if (t.depth[j] !== depth) continue;
      var x0 = this.x(t.start[j]), x1 = Math.max(x0 + 1, this.x(t.start[j] + t.dur[j]));
      var dist = px < x0 ? x0 - px : px > x1 ? px - x1 : 0;
      if (dist < bestDist) { bestDist = dist; best = j; }
    }
    if (best === null) return null;
    return {lane: lane.lane, idx: t.idx[best], count: t.count[best], busy: t.busy[best], dur: t.dur[best],
            start: t.start[best]};
  };

  Timeline.prototype.pick = function (px, py) {
    var h = this.hit(px, py);
    if (!h) return;
    this.showEvent(h.lane, h.idx, h.count > 1 ? h : null);
  };

  Timeline.prototype.showEvent = function (lane, idx, run) {
    var self = this;
    return this.getJSON(this.url + "event/?lane=" + encodeURIComponent(lane) + "&idx=" + encodeURIComponent(idx))
      .then(function (ev) {
        self.selected = ev;
        self.renderDetails(ev, run);
        self.draw();
      })
      .catch(function (err) { self.status.textContent = self.t.eventUnavailable + " " + err.message; });
  };

  Timeline.prototype.renderDetails = function (ev, run) {
    var self = this, d = this.details;
    d.textContent = "";
    d.append(el("h3", "tl-ev-name", ev.name));
    if (run) {
      d.append(el("p", "tl-run", fill(this.t.run, {n: run.count, dur: fmtNs(run.dur), busy: fmtNs(run.busy)})));
    }
    var table = el("table", "tl-args");
    function row(k, v) {
      var tr = el("tr");
      tr.append(el("th", null, k), el("td", null, v));
      table.append(tr);
    }
    row(this.t.lane, ev.group + " / " + ev.lane_name);
    row(this.t.start, fmtNs(ev.start_ns) + " " + fill(this.t.absolute, {ns: ev.start_abs_ns}));
    row(this.t.duration, fmtNs(ev.dur_ns));
    Object.keys(ev.args || {}).forEach(function (k) {
      var v = ev.args[k];
      if (v === null || v === undefined || k === "name") return;
      row(k, typeof v === "object" ? JSON.stringify(v) : String(v));
    });
    d.append(table);
    if (ev.links && ev.links.length) {
      d.append(el("h4", null, ev.table === "host_ops" ? this.t.launches : this.t.launchedBy));
      var ul = el("ul", "tl-links");
      ev.links.forEach(function (link) {
        var li = el("li");
        var b = el("button", "tl-link", link.name + " · " + fmtNs(link.dur_ns) + " · " + link.kind);
        b.type = "button";
        b.addEventListener("click", function () { self.reveal(link); });
        li.append(b);
        ul.append(li);
      });
      d.append(ul);
    }
  };

  Timeline.prototype.reveal = function (ev) {
    // centre the event with some context, then select it
    var w = Math.max(ev.dur_ns * 8, 2000);
    var mid = ev.start_ns + ev.dur_ns / 2;
    this.setView(mid - w / 2, mid + w / 2);
    return this.showEvent(ev.lane, ev.idx, null);
  };

  Timeline.prototype.runSearch = function (q) {
    var self = this;
    q = (q || "").trim();
    if (!q) {
      this.search = null;
      this.matchInfo.textContent = "";
      if (this.data) this.indexNames(this.data);
      this.draw();
      return Promise.resolve();
    }
    return this.getJSON(this.url + "search/?q=" + encodeURIComponent(q) + "&limit=200").then(function (res) {
      self.search = res;
      self.matchPos = -1;
      self.matchInfo.textContent = fill(res.total === 1 ? self.t.match : self.t.matches, {n: res.total});
      if (self.data) self.indexNames(self.data);
      self.draw();
    }).catch(function (err) { self.status.textContent = self.t.searchFailed + " " + err.message; });
  };

  Timeline.prototype.stepMatch = function (dir) {
    if (!this.search || !this.search.matches.length) return;
    var n = this.search.matches.length;
    this.matchPos = (this.matchPos + dir + n) % n;
    this.matchInfo.textContent = (this.matchPos + 1) + " / " + this.search.total;
    this.reveal(this.search.matches[this.matchPos]);
  };

  function mount(root, opts) {
    var tl = new Timeline(root, opts || {url: root.dataset.timelineUrl});
    root.pyptoTimeline = tl;
    return tl;
  }

  window.PyptoTimeline = {mount: mount};
  document.addEventListener("DOMContentLoaded", function () {
    var roots = document.querySelectorAll("[data-timeline-url]");
    for (var i = 0; i < roots.length; i++) mount(roots[i], {url: roots[i].dataset.timelineUrl});
  });
})();
