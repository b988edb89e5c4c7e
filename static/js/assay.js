// Assay's small behaviours. No inline script anywhere (CSP forbids it); text only, never
// innerHTML, so untrusted strings stay inert.
(function () {
  "use strict";

  // Start a run: show only the options of the chosen target kind. Without script every
  // option stays visible and the server ignores the ones the kind does not use.
  function syncTargetOptions(form) {
    var checked = form.querySelector('input[name="target_kind"]:checked');
    var kind = checked ? checked.value : null;
    form.querySelectorAll(".target-options[data-target-kind]").forEach(function (box) {
      box.hidden = kind !== null && box.dataset.targetKind !== kind;
    });
    // A model target's provider shows its own fields (Anthropic's version, Azure's deployment).
    var provider = form.querySelector('select[name="provider"]');
    form.querySelectorAll(".provider-options[data-provider]").forEach(function (box) {
      box.hidden = provider !== null && box.dataset.provider !== provider.value;
    });
  }

  // The viewer's time zone, for the server to show times in (config.middleware reads it).
  function rememberTimeZone() {
    var zone;
    try { zone = Intl.DateTimeFormat().resolvedOptions().timeZone; } catch (e) { return; }
    if (!zone || document.cookie.indexOf("assay_tz=" + encodeURIComponent(zone)) !== -1) return;
    document.cookie = "assay_tz=" + encodeURIComponent(zone) + "; path=/; max-age=31536000; SameSite=Lax";
  }

  function init() {
    rememberTimeZone();
    document.querySelectorAll("form.run-form").forEach(function (form) {
      syncTargetOptions(form);
      form.addEventListener("change", function (event) {
        var name = event.target && event.target.name;
        if (name === "target_kind" || name === "provider") syncTargetOptions(form);
      });
    });
  }

  // An htmx request whose session expired gets 401 (config.middleware) and htmx swaps
  // nothing: go to the login page, with the way back. The labeling queue handles it itself
  // (static/js/labeling.js keeps the typed label), so it is left alone here.
  document.addEventListener("htmx:responseError", function (event) {
    var xhr = event.detail && event.detail.xhr;
    if (!xhr || xhr.status !== 401 || document.getElementById("label-queue")) return;
    var next = window.location.pathname + window.location.search;
    window.location.assign("/accounts/login/?next=" + encodeURIComponent(next));
  });

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", init);
  } else {
    init();
  }
})();
