// Reloads the page of a run still in progress (the server marks it with
// data-refresh-seconds) until the run ends, keeping what the reviewer opened and where they
// were: the open <details> blocks and the scroll position survive each reload.
(function () {
  "use strict";
  var key = "switchyard-refresh:" + location.pathname + location.search;

  function restore() {
    var saved = sessionStorage.getItem(key);
    if (!saved) return;
    sessionStorage.removeItem(key);
    var state = JSON.parse(saved);
    state.open.forEach(function (id) {
      var element = document.getElementById(id);
      if (element) element.open = true;
    });
    window.scrollTo(0, state.y);
  }

  function schedule() {
    var live = document.querySelector("[data-refresh-seconds]");
    if (!live) return;
    var seconds = Number(live.getAttribute("data-refresh-seconds")) || 2;
    window.setTimeout(function () {
      var open = Array.prototype.map.call(
        document.querySelectorAll("details[open][id]"),
        function (element) { return element.id; }
      );
      sessionStorage.setItem(key, JSON.stringify({ open: open, y: window.scrollY }));
      location.reload();
    }, seconds * 1000);
  }

  document.addEventListener("DOMContentLoaded", function () {
    restore();
    schedule();
  });
})();
