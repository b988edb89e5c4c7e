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
  }

  function init() {
    document.querySelectorAll("form.run-form").forEach(function (form) {
      syncTargetOptions(form);
      form.addEventListener("change", function (event) {
        if (event.target && event.target.name === "target_kind") syncTargetOptions(form);
      });
    });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", init);
  } else {
    init();
  }
})();
