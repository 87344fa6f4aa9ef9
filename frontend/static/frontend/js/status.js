// Live pipeline progress: polls the profile's API until it is ready or failed, then reloads once.
(function () {
  "use strict";
  var root = document.getElementById("profile-status");
  var pre = document.getElementById("summary");
  var data = document.getElementById("summary-data");
  if (pre && data) { pre.textContent = JSON.stringify(JSON.parse(data.textContent), null, 2); }
  var initial = document.getElementById("bar");  // the width comes from data (CSP: no style attribute)
  if (initial) { initial.style.width = Math.max(0, Math.min(100, +initial.dataset.width || 0)) + "%"; }
  if (!root || root.dataset.finished === "1") { return; }
  var statusEl = document.getElementById("status");
  var bar = document.getElementById("bar");
  var progress = document.getElementById("progress");
  var errorEl = document.getElementById("error");
  var fmt = document.getElementById("format");
  var labelsEl = document.getElementById("status-labels");
  var labels = labelsEl ? JSON.parse(labelsEl.textContent) : {};
  function poll() {
    fetch(root.dataset.apiUrl, {headers: {"Accept": "application/json"}, credentials: "same-origin"})
      .then(function (r) { return r.ok ? r.json() : Promise.reject(r.status); })
      .then(function (p) {
        statusEl.textContent = labels[p.status] || p.status;
        statusEl.className = "status s-" + p.status;
        bar.style.width = p.progress + "%";
        progress.textContent = p.progress;
        if (p.detected_format) { fmt.textContent = p.detected_format; }
        if (p.error) { errorEl.textContent = p.error_localized || p.error; errorEl.hidden = false; }
        if (p.status === "ready" || p.status === "failed") { window.location.reload(); return; }
        setTimeout(poll, 1000);
      })
      .catch(function () { setTimeout(poll, 3000); });
  }
  setTimeout(poll, 500);
})();
