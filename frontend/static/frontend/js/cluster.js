/* The cluster page's rank strip: one row per rank on one aligned time axis, step bars that open the rank's
 * timeline at that step ("#abs=START,END", absolute ns as text). Rank data is the page's json_script, its times
 * already written as text by the view (frontend/templatetags/durations.py). */
(function () {
  "use strict";
  var box = document.getElementById("cluster-strip"), src = document.getElementById("cluster-strip-data");
  if (!box || !src) return;
  var data = JSON.parse(src.textContent), words = document.getElementById("cluster-text").dataset;
  function fill(text, fields) {
    return text.replace(/\{(\w+)\}/g, function (m, k) { return k in fields ? String(fields[k]) : m; });
  }
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }
  var span = Math.max(1, data.span_ns);
  data.ranks.forEach(function (r) {
    var row = el("div", "cs-row");
    row.dataset.rank = String(r.rank);
    var label = el("div", "cs-label", fill(words.rank, {r: r.rank}));
    label.append(el("small", null, " · " + (r.offset_ns === null ? words.untimed
                                            : fill(words.offset, {time: r.offset_text}))));
    var track = el("div", "cs-track");
    r.steps.forEach(function (s, i) {
      var link = r.timeline && s[3] ? el("a", "cs-step") : el("span", "cs-step cs-nolink");
      link.style.left = (100 * s[1] / span) + "%";
      link.style.width = Math.max(0.2, 100 * (s[2] - s[1]) / span) + "%";
      link.className += i % 2 ? " cs-odd" : "";
      var text = s[0] !== null ? fill(words.step, {s: s[0]}) : "";
      link.textContent = text;
      link.title = text + " · " + s[5] + (r.timeline ? "" : " · " + words.noTimeline);
      if (r.timeline && s[3]) link.href = "/profiles/" + r.timeline + "/timeline/#abs=" + s[3] + "," + s[4];
      track.append(link);
    });
    row.append(label, track);
    box.append(row);
  });
  box.dataset.ready = "1";
})();
