// The API reference: filter operations by text; opening a #op-… link unfolds that operation.
(function () {
  "use strict";
  var input = document.getElementById("api-filter");
  if (input) {
    input.addEventListener("input", function () {
      var q = input.value.trim().toLowerCase();
      document.querySelectorAll(".api-group").forEach(function (group) {
        var shown = 0;
        group.querySelectorAll(".api-op").forEach(function (op) {
          var hit = !q || op.dataset.search.toLowerCase().indexOf(q) !== -1;
          op.classList.toggle("filtered-out", !hit);
          if (hit) { shown += 1; }
        });
        group.classList.toggle("filtered-out", shown === 0);
      });
    });
  }
  function openHash() {
    var el = location.hash && document.getElementById(location.hash.slice(1));
    if (el && el.tagName === "DETAILS") { el.open = true; }
  }
  window.addEventListener("hashchange", openHash);
  openHash();
})();
