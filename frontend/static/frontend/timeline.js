/* PyPTO timeline viewer: a canvas that asks the server for one level-of-detail window at a time.
 *
 * Mount on an element with `data-timeline-url="/api/profiles/ID/timeline/"` (auto-mounted on load), or call
 * `PyptoTimeline.mount(element, {url})`. It uses three endpoints under that URL:
 *   GET url?start_ns=&end_ns=&width_px=   the window (pypto_core.timeline.TimelineIndex.window)
 *   GET url + "event/?lane=&idx="         one event's details and its flow links
 *   GET url + "search/?q="                events whose name contains q
 *   GET url + "run/?lane=&depth=&start_ns=&end_ns="   a merged run's top names by count and time
 *   GET/PUT url + "layout/"               this user's hidden lanes and folded groups (kept server-side)
 *   GET url + "critical/?start_ns=&end_ns=&width_px="   the steps' critical path (shown by a toggle)
 * Times are ns relative to the answer's base_ns (a string: absolute ns exceed 2**53).
 * Layout as Perfetto and MindStudio Insight: the widget fills the window down to its bottom edge, a ruler that
 * never scrolls away, lanes under collapsible process headings, details in a resizable bottom panel; keys
 * (W/S zoom, A/D and arrows pan, F fit) work as soon as the page has focus.
 * Every name from a profile is user data: drawn with fillText or set with textContent, never as HTML.
 */
(function () {
  "use strict";

  var LABEL_W = 190, AXIS_H = 30, ROW_H = 18, GROUP_H = 20, COUNTER_H = 32, LANE_GAP = 3;
  // A counter lane: a band on top for its max-value label, the area below it (they never overlap).
  var COUNTER_LABEL_H = 11;
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

  // A group's stable key (saved layouts name folded groups by it); its shown name is in the page's language.
  function groupId(lane) { return lane.group_id || lane.group; }

  function niceStep(ns) {
    var p = Math.pow(10, Math.floor(Math.log10(ns)));
    var m = ns / p;
    return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
  }

  // The widget's words: English here, the page's language from <template id="tl-text" data-*> (the
  // timeline page fills it with translated text); "{n}"-style fields are filled in by fill().
  var TEXT = {
    search: "Search by name", searchLabel: "Search events by name", reset: "Reset zoom", loading: "Loading",
    help: "W/S zoom · A/D pan · F fit · Ctrl+wheel zoom · drag pan · drag the ruler to measure", canvas: "Timeline",
    hint: "Click an event to see its details.", unavailable: "Timeline unavailable:",
    eventUnavailable: "Event details unavailable:", searchFailed: "Search failed:",
    run: "A run of {n} events over {dur} (busy {busy}); zoom in to separate them. Showing the longest member:",
    lane: "Lane", start: "Start", absolute: "(absolute {ns} ns)", duration: "Duration",
    launches: "Launches kernels", launchedBy: "Launched by host ops", match: "{n} match", matches: "{n} matches",
    scale: "{span} shown · {bar}/bar",
    runSame: "{n} × {name}", runTop: "{k} {name} + {others} others", runCount: "{n} events",
    runTitle: "Run of {n} events", topByCount: "Most frequent", topByTime: "Most time",
    hide: "Hide lane", show: "Show", hiddenLanes: "Hidden lanes ({n})", constant: "never changes",
    fit: "Fit (F)", selection: "Selection {dur}", collapse: "Fold or unfold this group",
    allHidden: "every lane hidden", critical: "Critical path",
    criticalTitle: "Highlight each step’s critical path (from the what-if replay’s dependencies) and dim the rest",
    criticalNone: "No critical path: the profile has no device tasks in steps.",
    criticalSummary: "Critical path of step {step}: {dur}, device tasks {device}", counterMax: "max {v}",
    stepName: "Step {n}", step: "Step"
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
    this.lanes = [];          // layout of the visible lanes: {lane, y, h, info}
    this.view = null;         // {start, end} in relative ns
    this.range = null;        // a measured time range {start, end} (drag on the ruler, or shift+drag)
    this.selected = null;     // event details answer
    this.search = null;       // search answer
    this.matchPos = -1;
    this.hidden = null;       // lane ids hidden (null until the first answer says which)
    this.collapsed = {};      // group id (its English heading) -> true when folded
    this.critical = null;     // the critical path answer while the toggle is on
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
    var fit = el("button", "tl-btn tl-fit", this.t.fit);
    this.criticalBtn = el("button", "tl-btn tl-critical", this.t.critical);
    this.criticalBtn.title = this.t.criticalTitle;
    this.criticalBtn.setAttribute("aria-pressed", "false");
    prev.type = next.type = reset.type = fit.type = this.criticalBtn.type = "button";
    this.matchInfo = el("span", "tl-matches", "");
    this.criticalInfo = el("span", "tl-critical-info", "");
    this.status = el("span", "tl-status", "");
    this.spinner = el("span", "tl-spinner");
    this.spinner.setAttribute("role", "status");
    this.spinner.setAttribute("aria-label", this.t.loading);
    this.spinner.hidden = true;
    this.hiddenMenu = el("details", "tl-hidden-menu");
    this.hiddenSummary = el("summary", null, fill(this.t.hiddenLanes, {n: 0}));
    this.hiddenList = el("ul", "tl-hidden-list");
    this.hiddenMenu.append(this.hiddenSummary, this.hiddenList);
    var help = el("span", "tl-help", this.t.help);
    bar.append(this.searchInput, prev, next, this.matchInfo, reset, fit, this.criticalBtn, this.criticalInfo,
               this.hiddenMenu, this.spinner, this.status, help);
    this.ruler = el("canvas", "tl-ruler");
    this.ruler.setAttribute("aria-hidden", "true");
    this.scroller = el("div", "tl-scroller");
    this.body = el("div", "tl-body");
    this.canvas = el("canvas", "tl-canvas");
    this.canvas.tabIndex = 0;
    this.canvas.setAttribute("aria-label", this.t.canvas);
    this.labels = el("div", "tl-labels");
    this.body.append(this.canvas, this.labels);
    this.scroller.append(this.body);
    this.grip = el("div", "tl-grip");
    this.grip.setAttribute("role", "separator");
    this.grip.setAttribute("aria-orientation", "horizontal");
    this.details = el("div", "tl-details");
    this.details.append(el("div", "tl-hint", this.t.hint));
    this.root.append(bar, this.ruler, this.scroller, this.grip, this.details);
    this.ctx = this.canvas.getContext("2d");
    this.rctx = this.ruler.getContext("2d");

    this.searchInput.addEventListener("keydown", function (e) {
      if (e.key === "Enter") { e.preventDefault(); self.runSearch(self.searchInput.value); }
      e.stopPropagation();
    });
    prev.addEventListener("click", function () { self.stepMatch(-1); });
    next.addEventListener("click", function () { self.stepMatch(1); });
    reset.addEventListener("click", function () { self.fitAll(); });
    fit.addEventListener("click", function () { self.fit(); });
    this.criticalBtn.addEventListener("click", function () { self.toggleCritical(); });
    // Keys work as soon as the page has focus (not only the canvas), except while typing in a field.
    document.addEventListener("keydown", function (e) {
      var tag = (e.target && e.target.tagName) || "";
      if (/^(INPUT|TEXTAREA|SELECT)$/.test(tag) || (e.target && e.target.isContentEditable)) return;
      if (e.ctrlKey || e.metaKey || e.altKey) return;
      self.onKey(e);
    });
    this.canvas.addEventListener("wheel", function (e) { self.onWheel(e); }, {passive: false});
    this.canvas.addEventListener("mousedown", function (e) { self.onDown(e, false); });
    this.ruler.addEventListener("mousedown", function (e) { self.onDown(e, true); });
    this.canvas.addEventListener("mouseleave", function () { self.mouseX = undefined; });
    this.grip.addEventListener("mousedown", function (e) {
      e.preventDefault();
      self.resizing = {y: e.clientY, h: self.details.getBoundingClientRect().height};
    });
    window.addEventListener("mousemove", function (e) { self.onMove(e); });
    window.addEventListener("mouseup", function (e) { self.onUp(e); });
    window.addEventListener("resize", function () { self.fitHeight(); self.layout(); self.draw(); self.scheduleFetch(); });
    this.fitHeight();
  };

  // The widget takes the window from its top edge down (Perfetto's whole-window layout); the details panel
  // below the lanes keeps the height the user dragged it to.
  Timeline.prototype.fitHeight = function () {
    var top = this.root.getBoundingClientRect().top + (window.scrollY || 0);
    var h = Math.max(420, window.innerHeight - Math.max(0, top) - 8);
    this.root.style.height = h + "px";
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

  Timeline.prototype.visibleLaneIds = function () {
    if (!this.data || !this.hidden) return null;
    var self = this, ids = [], all = true;
    this.data.lanes.forEach(function (ln) {
      if (self.hidden[ln.id] || self.collapsed[groupId(ln)]) all = false;
      else ids.push(ln.id);
    });
    return all ? null : ids;
  };

  Timeline.prototype.fetchWindow = function (start, end) {
    var self = this, seq = ++this.seq;
    var q = "width_px=" + Math.round(this.plotWidth() * (start === null ? 1 : 1 + 2 * MARGIN));
    if (start !== null) {
      var w = end - start;
      q += "&start_ns=" + Math.floor(start - MARGIN * w) + "&end_ns=" + Math.ceil(end + MARGIN * w);
    }
    var ids = this.visibleLaneIds();
    if (ids) q += "&lanes=" + ids.join(",");
    return this.getJSON(this.url + "?" + q).then(function (answer) {
      if (seq !== self.seq) return;   // a newer window was asked for meanwhile
      self.data = answer;
      self.indexNames(answer);
      if (!self.hidden) self.takeLayout(answer);
      if (!self.view && self.absWindow) self.view = absView(self.absWindow, answer.base_ns);
      if (!self.view) {               // the first view fits the events (counters often run longer)
        var span = answer.slice_span_ns || answer.span_ns, pad = Math.max(1, (span[1] - span[0]) * 0.02);
        self.view = {start: span[0] - pad, end: span[1] + pad};
        self.scheduleFetch();
      }
      self.status.textContent = "";
      if (self.critical) self.fetchCritical(self.view);
      self.root.dataset.ready = "1";
      self.root.dataset.nsPerPx = String(answer.ns_per_px);
      self.layout();
      self.draw();
    }).catch(function (err) {
      if (seq === self.seq) self.status.textContent = self.t.unavailable + " " + err.message;
    });
  };

  // ---- the critical path: asked for with each window while the toggle is on ----------------------------
  Timeline.prototype.toggleCritical = function () {
    var on = !this.critical;
    this.criticalBtn.setAttribute("aria-pressed", on ? "true" : "false");
    this.criticalBtn.classList.toggle("tl-on", on);
    if (!on) {
      this.critical = null;
      this.criticalInfo.textContent = "";
      delete this.root.dataset.critical;
      this.draw();
      return;
    }
    this.critical = {segments: null};
    this.fetchCritical(this.view);
  };

  Timeline.prototype.fetchCritical = function (view) {
    var self = this, seq = this.seq, q = "width_px=" + Math.round(this.plotWidth() * (1 + 2 * MARGIN));
    if (view) {
      var w = view.end - view.start;
      q += "&start_ns=" + Math.floor(view.start - MARGIN * w) + "&end_ns=" + Math.ceil(view.end + MARGIN * w);
    }
    return this.getJSON(this.url + "critical/?" + q).then(function (answer) {
      if (!self.critical || seq !== self.seq) return;
      self.critical = answer;
      self.root.dataset.critical = answer.available ? String(answer.segments.start.length) : "none";
      self.status.textContent = answer.available ? "" : (answer.reason || self.t.criticalNone);
      var step = answer.steps && answer.steps[0];
      self.criticalInfo.textContent = step ? fill(self.t.criticalSummary, {
        step: step.step_id !== null && step.step_id !== undefined ? step.step_id : step.step + 1,
        dur: fmtNs(step.end_ns - step.start_ns), device: fmtNs(step.device_ns)}) : "";
      self.draw();
    }).catch(function (err) { self.status.textContent = self.t.unavailable + " " + err.message; });
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

  // ---- lanes: hidden, folded, remembered server-side --------------------------------------------------
  Timeline.prototype.takeLayout = function (answer) {
    var self = this;
    this.hidden = {};
    answer.lanes.forEach(function (ln) { if (ln.hidden) self.hidden[ln.id] = true; });
    this.collapsed = {};
    ((answer.layout && answer.layout.collapsed) || []).forEach(function (g) { self.collapsed[g] = true; });
  };

  Timeline.prototype.saveLayout = function () {
    var self = this, hidden = [], shown = [], collapsed = Object.keys(this.collapsed).filter(function (g) {
      return self.collapsed[g];
    });
    this.data.lanes.forEach(function (ln) {
      var byDefault = ln.hidden_by_default !== undefined ? ln.hidden_by_default : false;
      if (self.hidden[ln.id] && !byDefault) hidden.push(ln.id);
      if (!self.hidden[ln.id] && byDefault) shown.push(ln.id);
    });
    var token = document.querySelector("input[name=csrfmiddlewaretoken]");
    var headers = {"Content-Type": "application/json", Accept: "application/json"};
    if (token) headers["X-CSRFToken"] = token.value;
    this.saving = fetch(this.url + "layout/", {
      method: "PUT", credentials: "same-origin", headers: headers,
      body: JSON.stringify({hidden: hidden, shown: shown, collapsed: collapsed})
    }).then(function (r) {
      if (!r.ok) throw new Error("HTTP " + r.status);
      self.root.dataset.saved = String(Date.now());
    }).catch(function (err) { self.status.textContent = self.t.unavailable + " " + err.message; });
    return this.saving;
  };

  Timeline.prototype.setHidden = function (laneId, hidden) {
    if (hidden) this.hidden[laneId] = true;
    else delete this.hidden[laneId];
    this.afterLayoutChange();
  };

  Timeline.prototype.toggleGroup = function (group) {
    if (this.collapsed[group]) delete this.collapsed[group];
    else this.collapsed[group] = true;
    this.afterLayoutChange();
  };

  Timeline.prototype.afterLayoutChange = function () {
    this.layout();
    this.draw();
    this.saveLayout();
    this.scheduleFetch();
  };

  // ---- layout and drawing ---------------------------------------------------------------------------
  Timeline.prototype.layout = function () {
    if (!this.data) return;
    var self = this;
    var lanes = this.data.lanes.slice().sort(function (a, b) { return a.sort - b.sort || a.id - b.id; });
    var y = 0, group = null, out = [], hiddenOnes = [];
    this.groups = [];
    var byGroup = {};
    lanes.forEach(function (info) { (byGroup[groupId(info)] = byGroup[groupId(info)] || []).push(info); });
    lanes.forEach(function (info) {
      if (groupId(info) !== group) {
        group = groupId(info);
        var members = byGroup[group], shown = members.filter(function (m) { return !self.hidden[m.id]; });
        this.groups.push({id: group, name: info.group, y: y, lanes: members.length, shown: shown.length,
                          collapsed: !!this.collapsed[group]});
        y += GROUP_H;
      }
      if (this.hidden[info.id]) { hiddenOnes.push(info); return; }
      if (this.collapsed[group]) return;
      var h = info.kind === "counter" ? COUNTER_H : Math.max(1, info.rows) * ROW_H;
      out.push({lane: info.id, y: y, h: h, info: info});
      y += h + LANE_GAP;
    }, this);
    this.lanes = out;
    this.laneById = {};
    out.forEach(function (l) { this.laneById[l.lane] = l; }, this);
    this.root.dataset.visibleLanes = String(out.length);
    var dpr = window.devicePixelRatio || 1;
    var w = this.scroller.clientWidth, h = y + 8;
    this.body.style.height = h + "px";
    this.canvas.style.width = w + "px";
    this.canvas.style.height = h + "px";
    this.canvas.width = Math.round(w * dpr);
    this.canvas.height = Math.round(h * dpr);
    this.ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    this.ruler.style.width = w + "px";
    this.ruler.style.height = AXIS_H + "px";
    this.ruler.width = Math.round(w * dpr);
    this.ruler.height = Math.round(AXIS_H * dpr);
    this.rctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    this.cssW = w;
    this.cssH = h;
    this.renderLabels();
    this.renderHiddenMenu(hiddenOnes);
  };

  // Lane names and group headings are DOM (text, buttons), laid over the canvas's left column.
  Timeline.prototype.renderLabels = function () {
    var self = this, box = this.labels;
    box.textContent = "";
    box.style.width = LABEL_W + "px";
    this.groups.forEach(function (g) {
      var head = el("button", "tl-group" + (g.collapsed ? " tl-collapsed" : ""),
                    (g.collapsed ? "▸ " : "▾ ") + g.name + (g.shown < g.lanes ? " (" + g.shown + "/" + g.lanes + ")" : ""));
      head.type = "button";
      head.title = self.t.collapse;
      head.dataset.group = g.id;
      head.setAttribute("aria-expanded", g.collapsed ? "false" : "true");
      head.style.top = g.y + "px";
      head.style.height = GROUP_H + "px";
      head.addEventListener("click", function () { self.toggleGroup(g.id); });
      box.append(head);
    });
    this.lanes.forEach(function (l) {
      var row = el("div", "tl-lane");
      row.style.top = l.y + "px";
      row.style.height = Math.min(l.h, ROW_H) + "px";
      row.dataset.lane = String(l.lane);
      var name = el("span", "tl-lane-name", l.info.name);
      name.title = l.info.detail ? l.info.name + " — " + l.info.detail : l.info.name;
      var hide = el("button", "tl-hide", "×");
      hide.type = "button";
      hide.title = self.t.hide;
      hide.setAttribute("aria-label", self.t.hide + ": " + l.info.name);
      hide.addEventListener("click", function () { self.setHidden(l.lane, true); });
      row.append(name, hide);
      box.append(row);
    });
  };

  Timeline.prototype.renderHiddenMenu = function (hiddenOnes) {
    var self = this;
    this.hiddenSummary.textContent = fill(this.t.hiddenLanes, {n: hiddenOnes.length});
    this.hiddenMenu.hidden = hiddenOnes.length === 0;
    this.hiddenList.textContent = "";
    hiddenOnes.forEach(function (info) {
      var li = el("li");
      var b = el("button", "tl-show", self.t.show);
      b.type = "button";
      b.dataset.lane = String(info.id);
      b.addEventListener("click", function () { self.setHidden(info.id, false); });
      var why = info.hidden_by_default ? " (" + self.t.constant + ")" : "";
      li.append(b, el("span", null, " " + info.group + " · " + info.name + why));
      self.hiddenList.append(li);
    });
  };

  Timeline.prototype.x = function (ns) {
    return LABEL_W + (ns - this.view.start) * this.plotWidth() / (this.view.end - this.view.start);
  };

  Timeline.prototype.ns = function (px) {
    return this.view.start + (px - LABEL_W) * (this.view.end - this.view.start) / this.plotWidth();
  };

  // An event's name as shown: a step marker ("Step 4" in the index, which the Perfetto export shares) in
  // the page's language; every other name is the profile's own text, shown as it is.
  Timeline.prototype.shownName = function (name, table) {
    if (table !== "steps" || typeof name !== "string") return name;
    var m = /^Step (\d+)$/.exec(name);
    return m ? fill(this.t.stepName, {n: m[1]}) : name === "Step" ? this.t.step : name;
  };

  Timeline.prototype.laneTable = function (laneId) {
    var lane = this.laneById[laneId];
    return lane ? lane.info.table : null;
  };

  // A bar's label: a lone event by its name; a merged run by what it holds, counted by the server.
  Timeline.prototype.barLabel = function (t, i, names) {
    var n = t.count[i], table = this.laneTable(t.lane);
    if (n <= 1) return this.shownName(names[t.name[i]], table);
    var top = t.top ? t.top[i] : -1;
    if (top === undefined || top < 0) return fill(this.t.runCount, {n: n});
    var k = t.top_count[i], name = this.shownName(names[top], table);
    if (k === n) return fill(this.t.runSame, {n: n, name: name});
    return fill(this.t.runTop, {k: k, name: name, others: n - k});
  };

  function clipText(c, text, width) {
    if (c.measureText(text).width <= width) return text;
    var lo = 0, hi = text.length;
    while (lo < hi) {                          // the longest prefix that fits with an ellipsis
      var mid = (lo + hi + 1) >> 1;
      if (c.measureText(text.slice(0, mid) + "…").width <= width) lo = mid; else hi = mid - 1;
    }
    return lo ? text.slice(0, lo) + "…" : "";
  }

  Timeline.prototype.draw = function () {
    if (!this.data || !this.view) return;
    var c = this.ctx, self = this, names = this.data.names;
    c.clearRect(0, 0, this.cssW, this.cssH);
    c.font = "11px system-ui, sans-serif";
    c.textBaseline = "middle";
    var searching = !!this.search;
    var dim = !!(this.critical && this.critical.available);  // the path is drawn over the dimmed rest
    var sel = this.selected;
    c.fillStyle = "#f3f4f6";
    this.groups.forEach(function (g) { c.fillRect(LABEL_W, g.y, self.cssW - LABEL_W, GROUP_H); });

    this.data.tracks.forEach(function (t) {
      var lane = self.laneById[t.lane];
      if (!lane) return;
      c.save();
      c.beginPath();
      c.rect(LABEL_W, lane.y, self.plotWidth(), lane.h);
      c.clip();
      if (t.kind === "counter") self.drawCounter(t, lane, dim);
      else {
        for (var i = 0; i < t.start.length; i++) {
          var x0 = self.x(t.start[i]), x1 = self.x(t.start[i] + t.dur[i]);
          if (x1 < LABEL_W || x0 > self.cssW) continue;
          var w = Math.max(1, x1 - x0), y = lane.y + t.depth[i] * ROW_H, name = names[t.name[i]];
          var merged = t.count[i] > 1;
          var alpha = merged ? 0.35 + 0.6 * (t.busy[i] / Math.max(1, t.dur[i])) : 0.9;
          if (searching && !self.nameHit[t.name[i]]) alpha *= 0.25;
          if (dim) alpha *= 0.3;
          c.fillStyle = merged ? "rgba(100,116,139," + alpha + ")" : hashColor(name, alpha);
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
          var left = Math.max(x0, LABEL_W), room = Math.min(x1, self.cssW) - left - 6;
          if (room > 24) {                     // inside its own bar only: labels never overlap
            var label = clipText(c, self.barLabel(t, i, names), room);
            if (label) {
              c.fillStyle = "#111";
              c.fillText(label, left + 3, y + ROW_H / 2);
            }
          }
        }
      }
      c.restore();
    });
    this.drawCritical();
    this.drawRange();
    this.drawMatches();
    this.drawFlows();
    this.drawAxis();
  };

  // The area fills the lane below a band that holds the max-value label, so the label never covers the line.
  Timeline.prototype.counterBox = function (lane) {
    return {labelTop: lane.y, labelBottom: lane.y + COUNTER_LABEL_H, areaTop: lane.y + COUNTER_LABEL_H + 1,
            base: lane.y + lane.h - 1};
  };

  Timeline.prototype.drawCounter = function (t, lane, dim) {
    var c = this.ctx, lo = Infinity, hi = -Infinity, max = t.max || t.min, i;
    for (i = 0; i < t.t.length; i++) {
      if (t.min[i] !== null && t.min[i] < lo) lo = t.min[i];
      if (max[i] !== null && max[i] > hi) hi = max[i];
    }
    if (!isFinite(lo)) return;
    lo = Math.min(lo, 0);                     // an area from zero, as Perfetto draws counters
    if (hi === lo) { hi = lo + 1; }
    var self = this, box = this.counterBox(lane), base = box.base;
    function y(v) { return base - (v - lo) / (hi - lo) * (base - box.areaTop); }
    c.fillStyle = dim ? "rgba(37,99,235,0.10)" : "rgba(37,99,235,0.30)";
    c.strokeStyle = dim ? "rgba(37,99,235,0.3)" : "rgba(37,99,235,0.9)";
    c.lineWidth = 1;
    c.beginPath();
    var started = false, lastX = null;
    for (i = 0; i < t.t.length; i++) {        // step area through the maxima
      if (max[i] === null) continue;
      var x = self.x(t.t[i]);
      if (!started) { c.moveTo(x, base); started = true; }
      c.lineTo(x, y(max[i]));
      var xn = i + 1 < t.t.length ? self.x(t.t[i + 1]) : x + 1;
      c.lineTo(xn, y(max[i]));
      lastX = xn;
    }
    if (started) {
      c.lineTo(lastX, base);
      c.closePath();
      c.fill();
      c.stroke();
    }
    c.save();
    c.font = "9px system-ui, sans-serif";
    c.textBaseline = "top";
    c.fillStyle = "#374151";
    c.fillText(fill(this.t.counterMax, {v: +hi.toPrecision(4)}), LABEL_W + 4, box.labelTop + 1);
    c.restore();
  };

  // The critical path over the dimmed lanes: tasks and host time as bars, waits as lines, and a link where
  // the path moves from one lane to another.
  var CRITICAL_COLORS = {task: "rgba(220,38,38,0.9)", host: "rgba(234,88,12,0.8)"};
  Timeline.prototype.drawCritical = function () {
    var cp = this.critical;
    if (!cp || !cp.available || !cp.segments) return;
    var c = this.ctx, self = this, g = cp.segments, prev = null, drawn = 0;
    c.save();
    for (var i = 0; i < g.start.length; i++) {
      var lane = this.laneById[g.lane[i]], kind = cp.kinds[g.kind[i]];
      if (!lane || lane.info.kind !== "slices") { prev = null; continue; }
      var x0 = this.x(g.start[i]), x1 = this.x(g.start[i] + g.dur[i]);
      var depth = Math.min(g.depth[i], Math.max(0, lane.info.rows - 1));
      var y = lane.y + depth * ROW_H, mid = y + ROW_H / 2;
      if (prev && prev.lane !== lane && x0 >= LABEL_W && x0 <= self.cssW) {
        c.strokeStyle = "rgba(220,38,38,0.7)";
        c.lineWidth = 1;
        c.beginPath();
        c.moveTo(x0 + 0.5, prev.mid);
        c.lineTo(x0 + 0.5, mid);
        c.stroke();
      }
      prev = {lane: lane, mid: mid};
      if (x1 < LABEL_W || x0 > self.cssW) continue;
      var left = Math.max(x0, LABEL_W), w = Math.max(1, Math.min(x1, self.cssW) - left);
      if (kind === "task" || kind === "host") {
        c.fillStyle = CRITICAL_COLORS[kind];
        c.fillRect(left, y + 2, w, ROW_H - 4);
        c.strokeStyle = "#7f1d1d";
        c.lineWidth = 1;
        c.strokeRect(left + 0.5, y + 2.5, Math.max(0, w - 1), ROW_H - 5);
      } else {                                  // a wait: the path runs on, nothing is busy
        c.strokeStyle = "rgba(220,38,38,0.9)";
        c.lineWidth = 2;
        c.setLineDash([3, 2]);
        c.beginPath();
        c.moveTo(left, mid);
        c.lineTo(left + w, mid);
        c.stroke();
        c.setLineDash([]);
      }
      drawn++;
    }
    c.restore();
    this.root.dataset.criticalDrawn = String(drawn);
  };

  Timeline.prototype.drawRange = function () {
    if (!this.range) return;
    var c = this.ctx, x0 = Math.max(LABEL_W, this.x(this.range.start)), x1 = Math.min(this.cssW, this.x(this.range.end));
    if (x1 <= x0) return;
    c.fillStyle = "rgba(37,99,235,0.10)";
    c.fillRect(x0, 0, x1 - x0, this.cssH);
    c.strokeStyle = "rgba(37,99,235,0.7)";
    c.lineWidth = 1;
    c.beginPath();
    c.moveTo(x0 + 0.5, 0); c.lineTo(x0 + 0.5, this.cssH);
    c.moveTo(x1 - 0.5, 0); c.lineTo(x1 - 0.5, this.cssH);
    c.stroke();
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

  // The ruler is a canvas of its own above the scrolling lanes, so it never scrolls away.
  Timeline.prototype.drawAxis = function () {
    var c = this.rctx, span = this.view.end - this.view.start, w = this.cssW;
    c.clearRect(0, 0, w, AXIS_H);
    c.fillStyle = "#f9fafb";
    c.fillRect(0, 0, w, AXIS_H);
    c.font = "10px system-ui, sans-serif";
    c.textBaseline = "middle";
    if (this.range) {
      var x0 = Math.max(LABEL_W, this.x(this.range.start)), x1 = Math.min(w, this.x(this.range.end));
      if (x1 > x0) {
        c.fillStyle = "rgba(37,99,235,0.25)";
        c.fillRect(x0, 0, x1 - x0, AXIS_H);
      }
    }
    var step = niceStep(span / 8), first = Math.ceil(this.view.start / step) * step;
    c.strokeStyle = "#9ca3af";
    c.fillStyle = "#374151";
    for (var t = first; t <= this.view.end; t += step) {
      var x = Math.round(this.x(t)) + 0.5;
      if (x < LABEL_W) continue;
      c.beginPath();
      c.moveTo(x, AXIS_H - 8);
      c.lineTo(x, AXIS_H);
      c.stroke();
      c.fillText(fmtNs(t), x + 2, AXIS_H / 2 - 3);
    }
    c.fillStyle = "#6b7280";
    var scale = fill(this.t.scale, {span: fmtNs(span), bar: fmtNs(this.data.bar_ns)});
    c.fillText(scale, 6, AXIS_H / 2 - 5, LABEL_W - 10);
    if (this.range) {
      c.fillStyle = "#1d4ed8";
      var text = fill(this.t.selection, {dur: fmtNs(this.range.end - this.range.start)});
      c.fillText(text, 6, AXIS_H / 2 + 7, LABEL_W - 10);
      this.root.dataset.selectionNs = String(Math.round(this.range.end - this.range.start));
    }
    c.strokeStyle = "#d1d5db";
    c.beginPath();
    c.moveTo(0, AXIS_H - 0.5);
    c.lineTo(w, AXIS_H - 0.5);
    c.stroke();
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

  Timeline.prototype.fitAll = function () {
    if (!this.data) return;
    var span = this.data.slice_span_ns || this.data.span_ns, pad = Math.max(1, (span[1] - span[0]) * 0.02);
    this.setView(span[0] - pad, span[1] + pad);
  };

  // F: the measured range, else the selected event, else every event.
  Timeline.prototype.fit = function () {
    var r = this.range, ev = this.selected;
    if (r && r.end > r.start) this.setView(r.start, r.end);
    else if (ev) {
      var pad = Math.max(ev.dur_ns * 0.1, 100);
      this.setView(ev.start_ns - pad, ev.start_ns + ev.dur_ns + pad);
    } else this.fitAll();
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
    var k = e.key.length === 1 ? e.key.toLowerCase() : e.key;
    var at = this.mouseX !== undefined && this.mouseX >= LABEL_W ? this.mouseX : undefined;
    if (k === "w" || k === "ArrowUp") this.zoom(0.5, at);
    else if (k === "s" || k === "ArrowDown") this.zoom(2, at);
    else if (k === "a" || k === "ArrowLeft") this.pan(-0.2);
    else if (k === "d" || k === "ArrowRight") this.pan(0.2);
    else if (k === "f") this.fit();
    else if (k === "Escape") { this.range = null; delete this.root.dataset.selectionNs; this.draw(); }
    else return;
    e.preventDefault();
  };

  // Wheel scrolls the lanes; Ctrl (or ⌘) + wheel zooms, Shift + wheel pans (Perfetto's bindings).
  Timeline.prototype.onWheel = function (e) {
    var r = this.canvas.getBoundingClientRect();
    if (e.ctrlKey || e.metaKey) {
      e.preventDefault();
      this.zoom(Math.pow(1.0015, e.deltaY), e.clientX - r.left);
    } else if (e.shiftKey || Math.abs(e.deltaX) > Math.abs(e.deltaY)) {
      e.preventDefault();
      this.pan((e.deltaX || e.deltaY) / 1000);
    }
  };

  Timeline.prototype.onDown = function (e, onRuler) {
    var r = this.canvas.getBoundingClientRect();
    var px = e.clientX - r.left;
    if (px < LABEL_W || !this.view) return;
    var measuring = onRuler || e.shiftKey;
    this.drag = {x: e.clientX, start: this.view.start, end: this.view.end, moved: false, px: px,
                 py: e.clientY - r.top, measure: measuring ? this.ns(px) : null};
    if (measuring) e.preventDefault();
    this.canvas.focus({preventScroll: true});
  };

  Timeline.prototype.onMove = function (e) {
    if (this.resizing) {                         // the details panel's top edge
      var h = Math.max(60, Math.min(this.root.clientHeight - 160, this.resizing.h - (e.clientY - this.resizing.y)));
      this.details.style.height = h + "px";
      this.details.style.maxHeight = "none";
      this.layout();
      this.draw();
      return;
    }
    var r = this.canvas.getBoundingClientRect();
    this.mouseX = e.clientX - r.left;
    if (!this.drag || !this.view) return;
    var dx = e.clientX - this.drag.x;
    if (Math.abs(dx) > 3) this.drag.moved = true;
    if (!this.drag.moved) return;
    if (this.drag.measure !== null) {
      var t = this.ns(Math.max(LABEL_W, Math.min(this.cssW, this.mouseX)));
      this.range = {start: Math.min(t, this.drag.measure), end: Math.max(t, this.drag.measure)};
      this.draw();
    } else {
      var nsPerPx = (this.drag.end - this.drag.start) / this.plotWidth();
      this.setView(this.drag.start - dx * nsPerPx, this.drag.end - dx * nsPerPx);
    }
  };

  Timeline.prototype.onUp = function () {
    if (this.resizing) { this.resizing = null; this.scheduleFetch(); return; }
    var d = this.drag;
    this.drag = null;
    if (d && !d.moved && d.measure === null) this.pick(d.px, d.py);
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
            start: t.start[best], depth: depth, label: this.barLabel(t, best, this.data.names)};
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
        if (run) return self.showRun(run);
      })
      .catch(function (err) { self.status.textContent = self.t.eventUnavailable + " " + err.message; });
  };

  // A merged run: its top names by count and by time, counted over every member by the server.
  Timeline.prototype.showRun = function (run) {
    var self = this;
    var q = "run/?lane=" + run.lane + "&depth=" + run.depth + "&start_ns=" + run.start + "&end_ns=" + (run.start + run.dur + 1);
    return this.getJSON(this.url + q).then(function (res) {
      var box = el("div", "tl-run-names");
      box.append(el("h4", null, fill(self.t.runTitle, {n: res.count})));
      [[self.t.topByCount, res.by_count], [self.t.topByTime, res.by_time]].forEach(function (pair) {
        var table = el("table", "tl-args tl-top");
        var cap = el("caption", null, pair[0]);
        table.append(cap);
        pair[1].forEach(function (n) {
          var tr = el("tr");
          tr.append(el("td", null, String(n.count)), el("td", null, fmtNs(n.total_ns)),
                    el("td", null, self.shownName(n.name, self.laneTable(run.lane))));
          table.append(tr);
        });
        box.append(table);
      });
      self.details.insertBefore(box, self.details.children[1] || null);
    }).catch(function () { /* the run's longest member is shown; its name list is an extra */ });
  };

  Timeline.prototype.renderDetails = function (ev, run) {
    var self = this, d = this.details;
    d.textContent = "";
    var name = this.shownName(ev.name, ev.table);
    d.append(el("h3", "tl-ev-name", run ? run.label : name));
    if (run) {
      d.append(el("p", "tl-run", fill(this.t.run, {n: run.count, dur: fmtNs(run.dur), busy: fmtNs(run.busy)}) +
                  " " + name));
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
    // centre the event with some context, then select it (showing its lane if it was hidden or folded)
    var info = this.data && this.data.lanes.filter(function (l) { return l.id === ev.lane; })[0];
    if (info && (this.hidden[ev.lane] || this.collapsed[groupId(info)])) {
      delete this.hidden[ev.lane];
      delete this.collapsed[groupId(info)];
      this.afterLayoutChange();
    }
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

  // Open at a given window: "#t=START,END" (ns relative to base_ns), as the cluster page links ranks.
  function hashWindow() {
    var m = /(?:^#|&)t=(-?\d+),(-?\d+)/.exec(window.location.hash || "");
    return m ? {start: +m[1], end: +m[2]} : null;
  }

  // "#abs=START,END": absolute ns (as text, past 2**53), from the cluster page; relative once base_ns is known.
  function hashAbs() {
    var m = /(?:^#|&)abs=(\d+),(\d+)/.exec(window.location.hash || "");
    return m ? {start: m[1], end: m[2]} : null;
  }

  function absView(abs, baseNs) {
    if (typeof BigInt === "undefined") return null;
    var start = Number(BigInt(abs.start) - BigInt(baseNs)), end = Number(BigInt(abs.end) - BigInt(baseNs));
    var pad = Math.max(1, (end - start) * 0.02);
    return end > start ? {start: start - pad, end: end + pad} : null;
  }

  function mount(root, opts) {
    var tl = new Timeline(root, opts || {url: root.dataset.timelineUrl});
    tl.absWindow = hashAbs();
    var w = hashWindow();
    if (w && w.end > w.start) { tl.view = {start: w.start, end: w.end}; tl.scheduleFetch(); }
    root.pyptoTimeline = tl;
    return tl;
  }

  window.PyptoTimeline = {mount: mount};
  document.addEventListener("DOMContentLoaded", function () {
    var roots = document.querySelectorAll("[data-timeline-url]");
    for (var i = 0; i < roots.length; i++) mount(roots[i], {url: roots[i].dataset.timelineUrl});
  });
})();
