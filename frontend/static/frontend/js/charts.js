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
  // a chart whose numbers share one unit (option "pyptoUnit", e.g. "ms") says it after each value
  function tooltipIn(unit) {
    return function (params) {
      var text = tooltip(params);
      return unit ? text.replace(/ — ([^<]*)/g, function (m, v) { return " — " + v + " " + esc(unit); }) : text;
    };
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
  // A legend of a few entries (type "plain", charts.py) wraps onto as many lines as the chart's width
  // needs, and the plot moves to make room: the grid's top (legend above) or bottom (legend below) given
  // for one line grows by each further line. A scrolled legend pages its entries away; it is kept only for
  // long lists (charts.py, LEGEND_WRAP_MAX).
  var measure = document.createElement("canvas").getContext("2d");
  function legendLines(legend, names, width) {
    measure.font = ((legend.textStyle || {}).fontSize || 12) + "px sans-serif";
    var gap = legend.itemGap === undefined ? 10 : legend.itemGap;
    var icon = (legend.itemWidth === undefined ? 25 : legend.itemWidth) + 5;
    var lines = 1, x = 0, room = width - 10;  // the legend's default padding, 5px a side
    names.forEach(function (n) {
      var w = icon + measure.measureText(String(n)).width;
      if (x > 0 && x + w > room) { lines += 1; x = 0; }
      x += w + gap;
    });
    return lines;
  }
  function fitLegend(chart, option, el) {
    var legends = Array.isArray(option.legend) ? option.legend : (option.legend ? [option.legend] : []);
    var grid = Array.isArray(option.grid) ? option.grid[0] : option.grid;
    if (!grid) return;
    var update = null;
    legends.forEach(function (legend) {
      if (legend.type === "scroll" || legend.orient === "vertical" || legend.show === false) return;
      var names = legend.data || (option.series || []).map(function (s) { return s.name; });
      names = names.map(function (n) { return n && typeof n === "object" ? n.name : n; });
      var lines = legendLines(legend, names, el.clientWidth || 600);
      var extra = (lines - 1) * ((legend.itemHeight || 14) + (legend.itemGap === undefined ? 10 : legend.itemGap));
      var side = legend.bottom !== undefined && legend.top === undefined ? "bottom" : "top";
      if (grid["pypto_" + side] === undefined) grid["pypto_" + side] = grid[side] || 60;
      update = update || {};
      update[side] = grid["pypto_" + side] + extra;
      el.dataset.legendLines = String(lines);
    });
    if (update) {
      Object.keys(update).forEach(function (k) { grid[k] = update[k]; });
      if (chart) chart.setOption({grid: Array.isArray(option.grid) ? [update] : update});
    }
  }
  function start(el) {
    var src = document.getElementById(el.dataset.chart);
    if (!src || !window.echarts) return;
    var option = JSON.parse(src.textContent);
    stripFormatters(option);
    var format = tooltipIn(typeof option.pyptoUnit === "string" ? option.pyptoUnit : "");
    delete option.pyptoUnit;
    var tips = Array.isArray(option.tooltip) ? option.tooltip : [option.tooltip || (option.tooltip = {})];
    tips.forEach(function (t) { t.formatter = format; t.confine = true; });
    (option.series || []).forEach(function (s) { if (s.tooltip) s.tooltip.formatter = format; });
    el.textContent = "";
    var chart = window.echarts.init(el, null, {renderer: "canvas"});
    fitLegend(null, option, el);
    chart.setOption(option);
    el.dataset.ready = "1";
    window.addEventListener("resize", function () { chart.resize(); fitLegend(chart, option, el); });
  }
  window.PyptoCharts = {escape: esc, tooltip: tooltip, start: start};
  document.querySelectorAll("[data-chart]").forEach(start);
  // legend swatches take their colour from the data (CSP allows no style="" attribute in the page)
  document.querySelectorAll(".swatch[data-colour]").forEach(function (el) {
    if (/^#[0-9a-fA-F]{3,8}$/.test(el.dataset.colour)) el.style.backgroundColor = el.dataset.colour;
  });
})();
