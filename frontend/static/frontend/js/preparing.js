// What a worker prepares for a page (page data, timeline index, chrome trace; analysis/page_builds.py): poll
// its state until the build ends, then reload the page, or, with data-ready-href, start the download it was
// waiting for. A page works without it: a refresh shows the same state.
(function () {
  "use strict";
  document.querySelectorAll("[data-builds-url]").forEach(function (el) {
    var kind = el.dataset.kind;
    function show(when) {
      el.querySelectorAll("[data-when]").forEach(function (part) {
        part.hidden = part.dataset.when !== when;
      });
    }
    function poll() {
      fetch(el.dataset.buildsUrl, {headers: {"Accept": "application/json"}, credentials: "same-origin"})
        .then(function (r) {
          if (r.status === 409) { return {}; }  // the profile is no longer ready (run again): reload
          return r.ok ? r.json() : Promise.reject(r.status);
        })
        .then(function (answer) {
          var state = (answer[kind] || {}).status;
          el.dataset.state = state || "";
          if (state === "queued" || state === "running") { setTimeout(poll, 2000); return; }
          if (state === "ready" && el.dataset.readyHref) {
            show("ready");
            window.location.assign(el.dataset.readyHref);  // an attachment: the page stays
            return;
          }
          window.location.reload();  // ready or failed: the page shows the data or the reason
        })
        .catch(function () { setTimeout(poll, 5000); });
    }
    setTimeout(poll, 1000);
  });
})();
