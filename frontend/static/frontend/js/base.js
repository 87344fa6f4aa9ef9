// Small behaviours shared by every page; pages work without them.
(function () {
  "use strict";
  document.querySelectorAll("select[data-autosubmit]").forEach(function (el) {
    el.addEventListener("change", function () { el.form.submit(); });
  });
  // Sizes and colours set here, not in style attributes: the pages' CSP allows only the app's own styles.
  document.querySelectorAll("[data-width]").forEach(function (el) {
    el.style.width = Number(el.dataset.width) + "%";
  });
  document.querySelectorAll("[data-swatch]").forEach(function (el) {
    el.style.background = el.dataset.swatch;
  });
  document.querySelectorAll("form[data-confirm]").forEach(function (form) {
    form.addEventListener("submit", function (ev) {
      if (!window.confirm(form.dataset.confirm)) { ev.preventDefault(); }
    });
  });
})();
