// Live job page: poll the job's API until it is finished; text goes in through textContent only.
(function () {
  var root = document.getElementById("job");
  if (!root) return;
  var FINAL = {done: 1, failed: 1, cancelled: 1};
  var labelsEl = document.getElementById("job-status-labels");
  var labels = labelsEl ? JSON.parse(labelsEl.textContent) : {};
  function tick() {
    fetch(root.dataset.apiUrl, {headers: {"Accept": "application/json"}, credentials: "same-origin"})
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (job) {
        if (!job) return;
        var status = document.getElementById("job-status");
        status.textContent = labels[job.status] || job.status;
        status.className = "status s-" + job.status;
        document.getElementById("job-message").textContent = job.message_localized || job.message || "";
        document.getElementById("job-log").textContent = job.log_tail || "";
        if (job.profile) {
          var holder = document.getElementById("job-profile");
          if (!holder.querySelector("a")) {
            var a = document.createElement("a");
            a.href = root.dataset.profileBase + job.profile + "/";
            a.textContent = (root.dataset.profileText || "Profile") + " #" + job.profile;
            holder.appendChild(a);
          }
        }
        var v = job.verification;
        if (FINAL[job.status]) {
          var c = document.getElementById("cancel"); if (c) c.remove();
          // a verification job: wait for its comparison's verdicts, then open the comparison on its findings
          if (v && job.status === "done") {
            var box = document.getElementById("verification");
            if (v.verdicts && v.verdicts.length && box) {
              window.location.href = box.dataset.comparisonBase + v.comparison + "/?findings=" +
                encodeURIComponent(box.dataset.findings);
              return;
            }
            if (v.comparison_status !== "failed") { setTimeout(tick, 2000); }
          }
          return;
        }
        setTimeout(tick, 1500);
      })
      .catch(function () { setTimeout(tick, 5000); });
  }
  tick();
})();
