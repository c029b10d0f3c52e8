// Keeps the page live: when the server says something it shows changed,
// fetch the page's main part again and put it in place.
(function () {
  "use strict";
  var main = document.getElementById("main");
  if (!main || !window.EventSource) { return; }
  var events = new EventSource("events");
  var busy = false, again = false;
  function refresh() {
    if (busy) { again = true; return; }
    busy = true;
    var url = new URL(window.location.href);
    url.searchParams.set("fragment", "1");
    fetch(url, { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
      .then(function (html) { main.innerHTML = html; })
      .catch(function () {})
      .finally(function () { busy = false; if (again) { again = false; refresh(); } });
  }
  events.addEventListener("changed", refresh);
})();
