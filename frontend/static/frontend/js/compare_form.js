// The compare form: the selects list the newest ready profiles; typing in a search box above a select asks
// the server for ready profiles by name and refills that select (the chosen option is kept). Names are
// untrusted: options are built with textContent, never markup.
(function () {
  "use strict";
  var fields = document.getElementById("compare-fields");
  if (!fields) return;
  var url = fields.dataset.searchUrl;
  function label(r) { return "#" + r.id + " " + r.name + " · " + r.created; }
  function refill(sel, results) {
    var keep = sel.value, kept = null;
    Array.prototype.slice.call(sel.options).forEach(function (o) {
      if (o.value === "" || o.value === keep) { if (o.value === keep && keep) kept = o; return; }
      sel.removeChild(o);
    });
    results.forEach(function (r) {
      if (String(r.id) === keep) return;
      var o = document.createElement("option");
      o.value = String(r.id);
      o.textContent = label(r);
      sel.appendChild(o);
    });
    sel.dataset.results = String(results.length);
    if (kept) sel.value = keep;
  }
  fields.querySelectorAll("input.profile-search").forEach(function (input) {
    var sel = document.getElementById(input.dataset.for), timer = null, seq = 0;
    input.addEventListener("input", function () {
      clearTimeout(timer);
      timer = setTimeout(function () {
        var mine = ++seq;
        sel.dataset.searching = "1";
        fetch(url + "?q=" + encodeURIComponent(input.value.trim()), {credentials: "same-origin", headers: {Accept: "application/json"}})
          .then(function (r) { return r.ok ? r.json() : Promise.reject(r.status); })
          .then(function (data) { if (mine === seq) { refill(sel, data.results); sel.dataset.searching = "0"; } })
          .catch(function () { if (mine === seq) sel.dataset.searching = "0"; });
      }, 250);
    });
  });
})();
