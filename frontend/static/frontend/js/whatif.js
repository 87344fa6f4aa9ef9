// "Replay the ticked findings": POST the ticked rules to the what-if API and show the replayed run.
(function () {
  "use strict";
  var root = document.getElementById("whatif");
  if (!root) { return; }
  var out = document.getElementById("whatif-result");
  var labels = {};
  document.getElementById("whatif-labels").content.querySelectorAll("span").forEach(function (el) {
    labels[el.dataset.k] = el.textContent;
  });
  function fill(text, values) {
    return text.replace(/\{(\w+)\}/g, function (_, k) { return values[k]; });
  }
  document.getElementById("whatif-run").addEventListener("click", function () {
    var rules = [];
    document.querySelectorAll(".whatif-pick input:checked").forEach(function (el) {
      if (rules.indexOf(el.value) < 0) { rules.push(el.value); }
    });
    if (!rules.length) { out.textContent = labels.none; return; }
    out.textContent = labels.busy;
    fetch(root.dataset.apiUrl, {
      method: "POST", credentials: "same-origin",
      headers: {"Content-Type": "application/json", "Accept": "application/json",
                "X-CSRFToken": root.querySelector("input[name=csrfmiddlewaretoken]").value},
      body: JSON.stringify({rules: rules})
    }).then(function (r) {
      return r.json().then(function (body) { return {ok: r.ok, body: body}; });
    }).then(function (res) {
      var b = res.body;
      if (!res.ok || !b.duration_ns) {
        var reason = (b && (b.rules || b.detail || b.note_localized || b.note)) || "?";
        out.textContent = fill(labels.error, {reason: String(reason)});
        return;
      }
      var text = fill(labels.result, {before: (b.original_ns / 1e6).toFixed(3), after: (b.duration_ns / 1e6).toFixed(3),
                                       speedup: b.speedup.toFixed(2)});
      if (b.per_token_ms) { text += " · " + fill(labels.token, {ms: b.per_token_ms.toFixed(3)}); }
      out.textContent = text;  // text only: nothing from the server is parsed as HTML
    }).catch(function (err) { out.textContent = fill(labels.error, {reason: String(err)}); });
  });
})();
