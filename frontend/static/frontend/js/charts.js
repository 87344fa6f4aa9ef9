// Starts every ECharts chart of a page: <div data-chart="ID"> + {{ options|json_script:"ID" }}.
// Names in chart data come from uploaded profiles: the tooltip formatter escapes everything it shows
// (ECharts renders tooltip strings as HTML), and no option may carry a formatter of its own.
(function () {
  "use strict";
  var ESC = {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"};
  function esc(s) { return String(s === undefined || s === null ? "" : s).replace(/[&<>"']/g, function (c) { return ESC[c]; }); }
  function num(v) {
    if (typeof v !== "number") return esc(v);
    var a = Math.abs(v);
    if (a !== 0 && (a < 0.01 || a >= 1e6)) return v.toExponential(3);
    return (Math.round(v * 1000) / 1000).toLocaleString();
  }
  function value(v) {
    if (Array.isArray(v)) return v.slice(0, 2).map(num).join(" · ");
    return num(v);
  }
  function tooltip(params) {
    var list = Array.isArray(params) ? params : [params];
    var out = [];
    if (Array.isArray(params) && list.length) out.push("<b>" + esc(list[0].axisValueLabel || list[0].name) + "</b>");
    list.forEach(function (p) {
      // an item may carry its whole tooltip as plain text (lines split by "\n"), escaped like every string
      if (p.data && typeof p.data.tip === "string") { out.push(p.data.tip.split("\n").map(esc).join("<br>")); return; }
      var label = Array.isArray(params) ? esc(p.seriesName) : esc(p.seriesName) + (p.name ? ": " + esc(p.name) : "");
      out.push(label + " — " + value(p.value));
    });
    return out.join("<br>");
  }
  function stripFormatters(o) {
    if (!o || typeof o !== "object") return;
    if (Array.isArray(o)) { o.forEach(stripFormatters); return; }
    Object.keys(o).forEach(function (k) {
      if (k === "formatter") { delete o[k]; } else { stripFormatters(o[k]); }
    });
  }
  function start(el) {
    var src = document.getElementById(el.dataset.chart);
    if (!src || !window.echarts) return;
    var option = JSON.parse(src.textContent);
    stripFormatters(option);
    var tips = Array.isArray(option.tooltip) ? option.tooltip : [option.tooltip || (option.tooltip = {})];
    tips.forEach(function (t) { t.formatter = tooltip; t.confine = true; });
    (option.series || []).forEach(function (s) { if (s.tooltip) s.tooltip.formatter = tooltip; });
    el.textContent = "";
    var chart = window.echarts.init(el, null, {renderer: "canvas"});
    chart.setOption(option);
    el.dataset.ready = "1";
    window.addEventListener("resize", function () { chart.resize(); });
  }
  window.PyptoCharts = {escape: esc, tooltip: tooltip, start: start};
  document.querySelectorAll("[data-chart]").forEach(start);
  // legend swatches take their colour from the data (CSP allows no style="" attribute in the page)
  document.querySelectorAll(".swatch[data-colour]").forEach(function (el) {
    if (/^#[0-9a-fA-F]{3,8}$/.test(el.dataset.colour)) el.style.backgroundColor = el.dataset.colour;
  });
})();
