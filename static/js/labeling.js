// The labeling queue's keyboard. Loaded only on the queue page; no inline script (CSP),
// and it never writes HTML: the server renders every item, htmx swaps it in.
//
// Keys (also in the "?" overlay, templates/labeling/fragments/queue_help.html):
//   p pass, f fail, c focus the critique, Enter save and next, j next, k previous,
//   u undo my last label, ? show/hide this help, Esc leave the critique / close the help.
// While typing in the critique every key types, except Ctrl+Enter / Cmd+Enter (save and
// next) and Esc (leave the critique): a bare Enter is a new line in the critique.
(function () {
  "use strict";

  function form() { return document.getElementById("label-form"); }

  function typing(target) {
    if (!target || !target.tagName) return false;
    var tag = target.tagName.toLowerCase();
    return tag === "textarea" || tag === "select" ||
      (tag === "input" && target.type !== "radio" && target.type !== "checkbox");
  }

  function choose(verdict) {
    var f = form();
    if (!f) return;
    var radio = f.querySelector('input[name="verdict"][value="' + verdict + '"]');
    if (radio) { radio.checked = true; radio.focus(); }
  }

  function save() {
    var f = form();
    if (!f) return;
    if (typeof f.requestSubmit === "function") f.requestSubmit(); else f.submit();
  }

  function clickById(id) {
    var el = document.getElementById(id);
    if (el && !el.hasAttribute("disabled") && !el.hidden) el.click();
  }

  function toggleHelp(show) {
    var help = document.getElementById("queue-help");
    if (!help) return;
    help.hidden = show === undefined ? !help.hidden : !show;
  }

  function onKey(event) {
    if (!document.getElementById("label-queue")) return;
    if (event.altKey) return;
    var inField = typing(event.target);
    if (event.key === "Escape") {
      toggleHelp(false);
      if (inField) event.target.blur();
      return;
    }
    if (event.key === "Enter") {
      if (inField && !(event.ctrlKey || event.metaKey)) return;  // a new line in the critique
      if (!inField && event.target && event.target.tagName &&
          ["a", "button", "summary"].indexOf(event.target.tagName.toLowerCase()) !== -1) return;
      event.preventDefault();
      save();
      return;
    }
    if (inField || event.ctrlKey || event.metaKey) return;
    var handled = true;
    switch (event.key) {
      case "p": choose("pass"); break;
      case "f": choose("fail"); break;
      case "c": {
        var critique = document.getElementById("id_critique");
        if (critique) critique.focus();
        break;
      }
      case "j": clickById("queue-next"); break;
      case "k": clickById("queue-prev"); break;
      case "u": clickById("queue-undo"); break;
      case "?": toggleHelp(); break;
      default: handled = false;
    }
    if (handled) event.preventDefault();
  }

  // After htmx swaps a new item in, take focus off whatever was replaced so the keys work
  // at once, and scroll the item's top into view.
  function afterSwap(event) {
    var item = document.getElementById("queue-item");
    if (!item || !event.detail || !event.detail.target) return;
    if (event.detail.target.id !== "queue-item" && !item.contains(event.detail.target)) return;
    var focus = item.querySelector("[data-autofocus]");
    if (focus) focus.focus(); else item.focus();
  }

  document.addEventListener("keydown", onKey);
  document.addEventListener("htmx:afterSettle", afterSwap);
})();
