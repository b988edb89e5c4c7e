// The labeling queue's keyboard. Loaded only on the queue page; no inline script (CSP),
// and it never writes HTML: the server renders every item, htmx swaps it in.
//
// Keys (also in the "?" overlay, templates/labeling/fragments/queue_help.html):
//   p pass, f fail, c focus the critique, Enter save and next, j next, k previous,
//   u undo my last label, ? show/hide the guidelines and this help (also the "?" button),
//   Esc leave the critique / close the help.
// While typing in the critique every key types, except Ctrl+Enter / Cmd+Enter (save and
// next) and Esc (leave the critique): a bare Enter is a new line in the critique.
//
// An expired session: the server answers the save with 401 (config.middleware), htmx swaps
// nothing, and this script keeps the typed verdict and critique in sessionStorage, shows
// the "log in again" banner (rendered by the server, hidden) and points its link back at
// this item. After login the queue page opens on that item, the draft is put back in the
// form and saved (once; the draft is dropped before the save is sent) with the label version
// it was typed over, so a label changed meanwhile makes it stale (409), never overwritten. The preference
// queue does the same: its form names its item in data-item (the pair's UUID) and its root
// the query parameter that shows it (data-item-param="pair"; the pass/fail queue: "trial").
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
      case "a": choose("A"); break;  // the preference queue (templates/labeling/preferences.html)
      case "b": choose("B"); break;
      case "t": choose("tie"); break;
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

  // --- a save refused because the session expired --------------------------------------

  function queueRoot() { return document.getElementById("label-queue"); }

  function draftKey() {
    var root = queueRoot();
    return root ? "assay.labelDraft:" + root.getAttribute("data-queue-url") : null;
  }

  function field(f, name) { return f ? f.querySelector('[name="' + name + '"]') : null; }

  // The item the form is for: its data-item, else its "trial" field.
  function itemOf(f) {
    if (!f) return "";
    if (f.getAttribute("data-item")) return f.getAttribute("data-item");
    return field(f, "trial") ? field(f, "trial").value : "";
  }

  function draftKeep() {
    var f = form(), key = draftKey();
    if (!f || !key) return null;
    var checked = f.querySelector('input[name="verdict"]:checked');
    var draft = {
      item: itemOf(f),
      verdict: checked ? checked.value : "",
      critique: field(f, "critique") ? field(f, "critique").value : "",
      // The version of the label this draft was typed over: the restored save sends it back,
      // so a label changed meanwhile (another tab, the API) is refused as stale, not overwritten.
      version: field(f, "expected_version") ? field(f, "expected_version").value : null,
    };
    try { window.sessionStorage.setItem(key, JSON.stringify(draft)); } catch (e) { /* full */ }
    return draft;
  }

  function sessionExpired() {
    var draft = draftKeep(), root = queueRoot();
    var banner = document.getElementById("queue-session-expired");
    var link = document.getElementById("queue-relogin");
    if (!banner || !root) return;
    if (link && draft && draft.item) {
      var param = root.getAttribute("data-item-param") || "trial";
      var next = root.getAttribute("data-queue-url") + "?" + param + "=" +
        encodeURIComponent(draft.item);
      link.setAttribute(
        "href", root.getAttribute("data-login-url") + "?next=" + encodeURIComponent(next));
    }
    banner.hidden = false;
    if (link) link.focus();
  }

  function onResponseError(event) {
    var xhr = event.detail && event.detail.xhr;
    if (xhr && xhr.status === 401) sessionExpired();
  }

  function draftRestore() {
    var key = draftKey(), f = form();
    if (!key || !f) return;
    var raw = null;
    try { raw = window.sessionStorage.getItem(key); } catch (e) { return; }
    if (!raw) return;
    var draft;
    try { draft = JSON.parse(raw); } catch (e) { draft = null; }
    if (!draft || !draft.item || draft.item !== itemOf(f)) return;
    window.sessionStorage.removeItem(key);
    var critique = field(f, "critique");
    if (critique) critique.value = draft.critique || "";
    var version = field(f, "expected_version");
    if (version && draft.version !== null && draft.version !== undefined) {
      version.value = draft.version;
    }
    if (draft.verdict) {
      choose(draft.verdict);
      save();
    }
  }

  document.addEventListener("keydown", onKey);
  document.addEventListener("htmx:afterSettle", afterSwap);
  document.addEventListener("htmx:responseError", onResponseError);
  document.addEventListener("click", function (event) {
    var button = event.target && event.target.closest && event.target.closest("#queue-help-button");
    if (button) { event.preventDefault(); toggleHelp(); }
  });
  // After "load", so htmx (which starts on DOMContentLoaded) already handles the form.
  if (document.readyState === "complete") draftRestore();
  else window.addEventListener("load", draftRestore);
})();
