// Diff pages: context hidden between hunks loads in place. Without this script each "hidden
// lines" link opens the file at that commit, at those lines.
(function () {
  "use strict";
  var STEP = 20;  // lines one click shows, as diffrows.EXPAND_STEP

  document.addEventListener("click", function (event) {
    var link = event.target.closest && event.target.closest("a.expand");
    if (!link || event.button !== 0 || event.ctrlKey || event.metaKey || event.shiftKey) { return; }
    var section = link.closest("section.file-diff");
    var row = link.closest("tr");
    if (!section || !section.dataset.lines || !row) { return; }
    event.preventDefault();
    if (link.dataset.loading === "yes") { return; }
    var above = link.dataset.where === "above";
    var start = parseInt(link.dataset.start, 10), end = parseInt(link.dataset.end, 10);
    var from = above ? Math.max(start, end - STEP + 1) : start;
    var to = above ? end : start + STEP - 1;
    var url = section.dataset.lines + (section.dataset.lines.indexOf("?") < 0 ? "?" : "&") +
      "start=" + from + "&end=" + to + "&delta=" + encodeURIComponent(link.dataset.delta);
    link.dataset.loading = "yes";
    fetch(url, { headers: { "Accept": "text/html" } })
      .then(function (response) {
        if (!response.ok) { throw new Error(String(response.status)); }
        return response.text();
      })
      .then(function (text) {
        var page = new DOMParser().parseFromString(text, "text/html");
        var body = page.querySelector("table.diff tbody");
        var rows = body ? Array.prototype.slice.call(body.rows) : [];
        rows.forEach(function (fresh) {
          row.parentNode.insertBefore(document.importNode(fresh, true), row);
        });
        if (above) {
          // the lines nearest the hunk came first: what is left hidden is above them
          link.dataset.end = String(from - 1);
          link.textContent = "\u2195 " + (from - start) + " hidden lines";
          if (from <= start) { link.remove(); }
        } else {
          link.dataset.start = String(start + rows.length);
          if (rows.length < STEP) { row.remove(); }
        }
        link.dataset.loading = "";
      })
      .catch(function () { link.dataset.loading = ""; window.location.href = link.href; });
  });
})();
