// Progressive enhancement only: every page works without this script.
(function () {
  "use strict";
  // Highlight a #L10-L20 range of lines and scroll to its first line.
  function highlightRange() {
    document.querySelectorAll("tr.hl").forEach(function (row) { row.classList.remove("hl"); });
    var match = /^#L(\d+)(?:-L(\d+))?$/.exec(window.location.hash);
    if (!match) { return; }
    var first = parseInt(match[1], 10);
    var last = match[2] ? parseInt(match[2], 10) : first;
    for (var n = first; n <= last; n++) {
      var row = document.getElementById("L" + n);
      if (row) { row.classList.add("hl"); }
    }
    var start = document.getElementById("L" + first);
    if (start) { start.scrollIntoView({ block: "center" }); }
  }
  // Shift-click a line number to select a range.
  var anchor = null;
  document.addEventListener("click", function (event) {
    var link = event.target.closest && event.target.closest("td.ln a");
    if (!link) { return; }
    var n = parseInt(link.textContent, 10);
    if (event.shiftKey && anchor !== null) {
      event.preventDefault();
      var lo = Math.min(anchor, n), hi = Math.max(anchor, n);
      history.replaceState(null, "", "#L" + lo + "-L" + hi);
      highlightRange();
    } else {
      anchor = n;
    }
  });
  window.addEventListener("hashchange", highlightRange);
  highlightRange();

  // A new token is selected whole when its field takes focus, ready to copy.
  document.querySelectorAll("input.token").forEach(function (field) {
    field.addEventListener("focus", function () { field.select(); });
  });

  // Fill in the last-commit column once the index can answer.
  var table = document.querySelector("table.files[data-ready='no']");
  if (!table) { return; }
  var tries = 0;
  function poll() {
    tries += 1;
    fetch(table.dataset.last, { headers: { "Accept": "application/json" } })
      .then(function (response) {
        if (!response.ok) { return [response.status, null]; }
        return response.json().then(function (body) { return [response.status, body]; });
      })
      .then(function (result) {
        var body = result[1];
        if (body === null) {  // an error answer: polling again would not help
          var failed = document.querySelector("p.indexing");
          if (failed) { failed.textContent = "The last commit of each entry cannot be shown: this repository could not be indexed."; }
          return;
        }
        if (!body.ready) {
          if (tries < 60) { setTimeout(poll, Math.min(250 * tries, 2000)); }
          return;
        }
        table.querySelectorAll("tr[data-name]").forEach(function (row) {
          var entry = body.entries[row.dataset.name];
          var msg = row.querySelector("td.lastmsg"), date = row.querySelector("td.lastdate");
          msg.textContent = ""; date.textContent = "";
          if (!entry) { return; }
          var link = document.createElement("a");
          link.href = entry.url; link.textContent = entry.summary;
          msg.appendChild(link);
          var time = document.createElement("time");
          time.dateTime = entry.when; time.textContent = entry.ago;
          date.appendChild(time);
        });
        table.dataset.ready = "yes";
        var note = document.querySelector("p.indexing");
        if (note) { note.remove(); }
      })
      .catch(function () { if (tries < 60) { setTimeout(poll, 2000); } });
  }
  poll();
})();
