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
