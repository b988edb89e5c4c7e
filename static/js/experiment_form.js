// Start an experiment: "Add a variant" copies the empty row (a <template>) with the next index
// in place of __prefix__ and counts it in the formset's TOTAL_FORMS. DOM clones and attributes
// only, never innerHTML. Without script the form keeps its rows; "remove" boxes work either way.
(function () {
  "use strict";

  function addRow(form) {
    var total = form.querySelector('input[name="variants-TOTAL_FORMS"]');
    var template = form.querySelector("template#variant-row-template");
    var list = form.querySelector("#variant-rows");
    if (!total || !template || !list) return;
    var index = parseInt(total.value, 10);
    var row = template.content.firstElementChild.cloneNode(true);
    row.querySelectorAll("[name], [id], [for]").forEach(function (el) {
      ["name", "id", "for"].forEach(function (attr) {
        var value = el.getAttribute(attr);
        if (value) el.setAttribute(attr, value.split("__prefix__").join(String(index)));
      });
    });
    row.querySelectorAll(".variant-number").forEach(function (el) {
      el.textContent = String(index + 1);
    });
    var label = row.querySelector('input[name$="-label"]');
    if (label) label.value = "variant " + (index + 1);
    list.appendChild(row);
    total.value = String(index + 1);
    if (label) label.focus();
  }

  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("form.experiment-form").forEach(function (form) {
      var button = form.querySelector("button.variant-add");
      if (!button) return;
      button.hidden = false;
      button.addEventListener("click", function () { addRow(form); });
    });
  });
})();
