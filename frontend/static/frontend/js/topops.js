// The top-ops table: rows from a json_script payload, filtered by op type, shape and block, sorted by any
// column. Every cell is set with textContent (names are untrusted).
(function () {
  "use strict";
  var root = document.getElementById("top-ops");
  var src = document.getElementById("top-ops-data");
  if (!root || !src) return;
  var rows = JSON.parse(src.textContent);
  var body = root.querySelector("tbody");
  var typeSel = document.getElementById("f-type"), blockSel = document.getElementById("f-block");
  var shapeIn = document.getElementById("f-shape"), nameIn = document.getElementById("f-name");
  var countEl = document.getElementById("top-ops-count");
  var sortKey = "total_us", sortDir = -1;
  function fill(sel, key) {
    var seen = {};
    // the option reads as the table does (a block in the page's language), the value stays the id
    rows.forEach(function (r) { seen[r[key]] = typeof r[key + "_text"] === "string" ? r[key + "_text"] : r[key]; });
    Object.keys(seen).sort().forEach(function (v) {
      var o = document.createElement("option"); o.value = v; o.textContent = seen[v]; sel.appendChild(o);
    });
  }
  fill(typeSel, "op_type"); fill(blockSel, "block");
  function fmt(key, v) {
    if (v === null || v === undefined) return "—";
    if (key === "share" || key === "roofline_efficiency") return (v * 100).toFixed(1) + "%";
    if (typeof v === "number") return v >= 100 || (key === "count" && v === Math.round(v)) ? v.toFixed(0) : v.toFixed(2);
    return String(v);
  }
  // Break opportunities in a long name, never inside a short word: after a space or a "_", ".", ":", "/",
  // ",", ";", ")" or ">" run, and in a run longer than LONG_WORD characters between camel-case words too
  // (Flash|Attention|Score|Grad; MatMulV2 stays whole). Each piece is a span kept on one line (the browser
  // broke "NCHW<…" from its ">" on its own) with a <wbr> between pieces; a piece longer than a column may
  // hold (NO_WRAP_MAX) may still break. Text nodes only, never markup from the data, nothing extra when the
  // name is copied.
  var SEPARATORS = /([ _.:\/,;)>\]-]+)/, CAMEL = /([a-z0-9])(?=[A-Z][a-z])/g, LONG_WORD = 16, NO_WRAP_MAX = 24;
  function breakable(parent, text) {
    var parts = [];
    text.split(SEPARATORS).forEach(function (piece, i) {
      if (i % 2) { parts[parts.length - 1] += piece; return; }  // a separator ends the piece before it
      parts.push.apply(parts, piece.length > LONG_WORD ? piece.replace(CAMEL, "$1\u0000").split("\u0000") : [piece]);
    });
    parts.filter(function (p) { return p !== ""; }).forEach(function (part, i) {
      if (i) parent.appendChild(document.createElement("wbr"));
      var piece = document.createElement("span");
      if (part.length <= NO_WRAP_MAX) piece.className = "piece";
      piece.textContent = part;
      parent.appendChild(piece);
    });
  }
  var NAMED = {op_type: true, name: true, shape: true};
  var cols = Array.prototype.map.call(root.querySelectorAll("thead th"), function (th) { return th.dataset.key; });
  function render() {
    var t = typeSel.value, b = blockSel.value, s = shapeIn.value.trim().toLowerCase(), n = nameIn.value.trim().toLowerCase();
    var out = rows.filter(function (r) {
      return (!t || r.op_type === t) && (!b || r.block === b) && (!s || r.shape.toLowerCase().indexOf(s) >= 0) &&
        (!n || r.name.toLowerCase().indexOf(n) >= 0);
    });
    out.sort(function (x, y) {
      var a = x[sortKey], c = y[sortKey];
      if (a === c) return 0;
      if (a === null || a === undefined) return 1;
      if (c === null || c === undefined) return -1;
      return (a < c ? -1 : 1) * sortDir;
    });
    var frag = document.createDocumentFragment();
    out.slice(0, 300).forEach(function (r) {
      var tr = document.createElement("tr");
      cols.forEach(function (k) {
        var td = document.createElement("td");
        if (NAMED[k]) {
          // long op types, names and shapes (a 20-input ForeachAddList, a cuDNN kernel) wrap at their
          // separators and are cut to two lines with an ellipsis, the whole text in the title: one such row
          // hid most of the scroll box
          var clamp = document.createElement("div");
          clamp.className = "clamp";
          clamp.title = fmt(k, r[k]);
          breakable(clamp, fmt(k, r[k]));
          td.appendChild(clamp);
        } else {
          // times come as the page prints every time ("92.1 ms", views/profile_pages.py); sorting reads the numbers
          td.textContent = typeof r[k + "_text"] === "string" ? r[k + "_text"] : fmt(k, r[k]);
        }
        if (typeof r[k] === "number") td.className = "num";
        if (k === "shape" || k === "name") td.className = "mono small";
        if (k === "block") td.title = td.textContent;
        tr.appendChild(td);
      });
      frag.appendChild(tr);
    });
    body.textContent = "";
    body.appendChild(frag);
    countEl.textContent = String(out.length);
  }
  root.querySelectorAll("thead th").forEach(function (th) {
    th.addEventListener("click", function () {
      if (sortKey === th.dataset.key) { sortDir = -sortDir; } else { sortKey = th.dataset.key; sortDir = -1; }
      root.querySelectorAll("thead th").forEach(function (o) { o.removeAttribute("aria-sort"); });
      th.setAttribute("aria-sort", sortDir < 0 ? "descending" : "ascending");
      render();
    });
  });
  [typeSel, blockSel].forEach(function (e) { e.addEventListener("change", render); });
  [shapeIn, nameIn].forEach(function (e) { e.addEventListener("input", render); });
  render();
})();
