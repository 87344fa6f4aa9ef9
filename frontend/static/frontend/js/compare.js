// The comparison page while the task runs: poll its API, then reload once it is done or failed.
(function () {
  "use strict";
  var root = document.getElementById("comparison");
  if (!root || root.dataset.finished === "1") return;
  function poll() {
    fetch(root.dataset.apiUrl, {credentials: "same-origin", headers: {Accept: "application/json"}})
      .then(function (r) { return r.ok ? r.json() : Promise.reject(r.status); })
      .then(function (c) {
        if (c.status === "done" || c.status === "failed") { window.location.reload(); return; }
        setTimeout(poll, 1000);
      })
      .catch(function () { setTimeout(poll, 3000); });
  }
  setTimeout(poll, 700);
})();

// The aligned table's filters: operator text, module, slower side, and how many times slower.
(function () {
  "use strict";
  var table = document.getElementById("aligned-table");
  if (!table) return;
  var op = document.getElementById("f-op"), mod = document.getElementById("f-module");
  var slower = document.getElementById("f-slower"), times = document.getElementById("f-times");
  var count = document.getElementById("f-count");
  var rows = Array.prototype.slice.call(table.tBodies[0].rows);
  function apply() {
    var text = op.value.trim().toLowerCase(), m = mod.value, s = slower.value;
    var least = parseFloat(times.value) || 1, shown = 0;
    rows.forEach(function (r) {
      var t = r.dataset.times === "inf" ? Infinity : parseFloat(r.dataset.times);
      var ok = (!text || r.dataset.key.toLowerCase().indexOf(text) >= 0) && (!m || r.dataset.module === m) &&
        (!s || r.dataset.slower === s) && (least <= 1 || t >= least);
      r.hidden = !ok;
      if (ok) shown += 1;
    });
    count.textContent = shown + " / " + rows.length;
  }
  [op, mod, slower, times].forEach(function (el) { el.addEventListener("input", apply); });
  apply();
})();
