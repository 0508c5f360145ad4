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

  // What the history index has not answered yet is asked again until it is: backing off to
  // 10 s, and never giving up while the index moves (its progress shows in p.indexing); only
  // after 30 polls in a row without a change does the page stop asking.
  function waitFor(ask) {
    var delay = 250, still = 0, last = null;
    function again(progress) {
      if (progress === last) { still += 1; } else { still = 0; last = progress; }
      if (still < 30) { setTimeout(run, delay); delay = Math.min(delay * 2, 10000); }
    }
    function run() { ask(again); }
    run();
  }
  function showProgress(progress) {
    var note = document.querySelector("p.indexing .progress");
    if (note && progress) {
      var done = progress[0], total = progress[1];
      note.textContent = done.toLocaleString("en") + " of " + total.toLocaleString("en") +
        " commits, " + (total ? Math.floor(100 * done / total) : 100) + "%";
    }
  }

  // A path's history being prepared: the page itself is fetched again, and its list put in
  // place once it is there (no reload: an open menu stays open).
  var pending = document.querySelector("p.indexing[data-poll='page']");
  if (pending) {
    waitFor(function (again) {
      fetch(window.location.href, { headers: { "Accept": "text/html" } })
        .then(function (response) { return response.ok ? response.text() : null; })
        .then(function (text) {
          if (text === null) { return; }
          var fresh = new DOMParser().parseFromString(text, "text/html");
          var note = fresh.querySelector("p.indexing");
          if (note) {
            var progress = note.querySelector(".progress");
            var mine = pending.querySelector(".progress");
            if (progress && mine) { mine.textContent = progress.textContent; }
            again(progress ? progress.textContent : null);
            return;
          }
          var list = fresh.querySelector("ol.commit-list"), pager = fresh.querySelector("nav.pager");
          if (list) { pending.replaceWith(list); }
          if (list && pager) { list.after(pager); }
        })
        .catch(function () { again(null); });
    });
  }

  // A file a big commit's page lists without its diff: its diff loads under its entry when
  // selected (one file at a time), and hides and shows again after that. Without the script,
  // the link opens the file's diff as a page.
  document.addEventListener("click", function (event) {
    var link = event.target.closest && event.target.closest("a.load-diff");
    if (!link || event.button !== 0 || event.ctrlKey || event.metaKey || event.shiftKey) { return; }
    event.preventDefault();
    // its place among the diffs (a slot kept for it), or else under its entry
    var item = (link.dataset.slot && document.getElementById(link.dataset.slot)) || link.closest("li");
    var loaded = item.querySelector("section.file-diff");
    if (loaded) { loaded.hidden = !loaded.hidden; return; }
    if (link.dataset.loading === "yes") { return; }
    link.dataset.loading = "yes";
    fetch(link.href, { headers: { "Accept": "text/html" } })
      .then(function (response) {
        if (!response.ok) { throw new Error(String(response.status)); }
        return response.text();
      })
      .then(function (text) {
        var page = new DOMParser().parseFromString(text, "text/html");
        var section = page.querySelector("section.file-diff");
        if (section) {
          item.appendChild(document.importNode(section, true));
          if (item.scrollIntoView) { item.scrollIntoView(); }
        }
        link.dataset.loading = "";
      })
      .catch(function () { link.dataset.loading = ""; window.location.href = link.href; });
  });

  // Fill in the last-commit column once the index can answer.
  var table = document.querySelector("table.files[data-ready='no']");
  if (!table) { return; }
  waitFor(function (again) {
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
          showProgress(body.progress);
          again(body.progress ? body.progress.join("/") : null);
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
          time.dateTime = entry.when; time.title = entry.exact; time.textContent = entry.ago;
          date.appendChild(time);
        });
        table.dataset.ready = "yes";
        var note = document.querySelector("p.indexing");
        if (note) { note.remove(); }
      })
      .catch(function () { again(null); });
  });
})();

// The ref switcher: the page holds its button alone; opening it fetches the list of branches
// and tags (newest first, bounded) from data-refs, and the filter box asks for it again with
// ?q=. Arrow keys move through the box and the list, Escape closes it.
(function () {
  "use strict";
  function setUp(switcher) {
    var menu = switcher.querySelector(".refmenu");
    var summary = switcher.querySelector("summary");
    var filter = document.createElement("input");
    filter.type = "search";
    filter.className = "reffilter";
    filter.placeholder = "Filter branches and tags";
    filter.setAttribute("aria-label", "Filter branches and tags");
    filter.autocomplete = "off";
    var slot = document.createElement("div");
    slot.className = "refslot";
    slot.setAttribute("aria-live", "polite");
    slot.textContent = "Loading…";
    menu.insertBefore(slot, menu.firstChild);
    menu.insertBefore(filter, slot);
    var asked = 0, timer = null;
    function load() {
      asked += 1;
      var mine = asked;
      var url = switcher.dataset.refs;  // exact bytes of the path kept: only q is added
      if (filter.value) { url += "&q=" + encodeURIComponent(filter.value); }
      fetch(url, { headers: { "Accept": "text/html" } })
        .then(function (response) {
          if (!response.ok) { throw new Error(String(response.status)); }
          return response.text();
        })
        .then(function (html) {
          if (mine !== asked) { return; }  // a newer filter's answer is on its way
          slot.innerHTML = html;
          var here = window.location.pathname;
          slot.querySelectorAll("a").forEach(function (link) {
            if (link.pathname === here) { link.setAttribute("aria-current", "page"); }
          });
        })
        .catch(function () {
          if (mine === asked) { slot.textContent = "The list could not be loaded."; }
        });
    }
    filter.addEventListener("input", function () {
      clearTimeout(timer);
      timer = setTimeout(load, 150);
    });
    filter.addEventListener("keydown", function (event) {
      if (event.key !== "Enter") { return; }
      event.preventDefault();
      var first = slot.querySelector("a");
      if (first) { first.click(); }
    });
    switcher.addEventListener("keydown", function (event) {
      if (event.key === "Escape" && switcher.open) {
        event.preventDefault();
        switcher.open = false;
        summary.focus();
        return;
      }
      if (event.key !== "ArrowDown" && event.key !== "ArrowUp") { return; }
      if (!switcher.open) { return; }
      var stops = [filter].concat(Array.prototype.slice.call(menu.querySelectorAll("a")));
      var at = stops.indexOf(document.activeElement);
      var next = event.key === "ArrowDown" ? at + 1 : at - 1;
      if (at === -1) { next = 0; }
      if (next < 0 || next >= stops.length) { return; }
      event.preventDefault();
      stops[next].focus();
    });
    load();
  }
  document.querySelectorAll("details.refswitch[data-refs]").forEach(function (switcher) {
    switcher.addEventListener("toggle", function () {
      if (!switcher.open) { return; }
      if (!switcher.querySelector(".reffilter")) { setUp(switcher); }
      switcher.querySelector(".reffilter").focus();
    });
  });
  // A click elsewhere closes an open switcher; so does Escape wherever the focus is.
  document.addEventListener("click", function (event) {
    document.querySelectorAll("details.refswitch[open]").forEach(function (switcher) {
      if (!switcher.contains(event.target)) { switcher.open = false; }
    });
  });
  document.addEventListener("keydown", function (event) {
    if (event.key !== "Escape" || event.defaultPrevented) { return; }
    document.querySelectorAll("details.refswitch[open]").forEach(function (switcher) {
      switcher.open = false;
    });
  });
  // A click on a line number of a pull request's diff fills its file's one comment form
  // (the number's column says the side); shift-click makes a range from the line before.
  document.addEventListener("click", function (event) {
    var cell = event.target.closest && event.target.closest("section.file-diff td.ln");
    if (!cell || !cell.textContent.trim()) { return; }
    var section = cell.closest("section.file-diff");
    var box = section && section.querySelector("details.review-line");
    if (!box) { return; }
    var form = box.querySelector("form");
    var side = cell.dataset.side ||
      (cell.previousElementSibling && cell.previousElementSibling.matches("td.ln") ? "new" : "old");
    var line = cell.textContent.trim();
    if (event.shiftKey && form.line.value && form.side.value === side) {
      var lo = Math.min(parseInt(form.line.value, 10), parseInt(line, 10));
      var hi = Math.max(parseInt(form.line.value, 10), parseInt(line, 10));
      form.start_line.value = String(lo);
      form.line.value = String(hi);
    } else {
      form.side.value = side;
      form.start_line.value = "";
      form.line.value = line;
    }
    box.open = true;
    form.body.focus();
  });
  // Paint labels in their colours: each is a checked #rrggbb in a data attribute, set through
  // the CSSOM (the pages' CSP allows no style attributes); without script a swatch shows it.
  function paintLabels() {
    document.querySelectorAll(".label[data-color]").forEach(function (chip) {
      var color = chip.getAttribute("data-color"), text = chip.getAttribute("data-text");
      if (!/^#[0-9a-f]{6}$/i.test(color) || !/^#[0-9a-f]{6}$/i.test(text)) { return; }
      chip.style.backgroundColor = color;
      chip.style.borderColor = color;
      chip.style.color = text;
    });
  }
  // Files dropped into a text that takes them (data-upload: the issue pages') are uploaded at
  // once, each put in the text as a Markdown link where the cursor is (an image as an image),
  // and named in a hidden "files" field: posting the form claims them. Without this script
  // the form's file input sends them with the form.
  document.querySelectorAll("textarea[data-upload]").forEach(function (area) {
    var form = area.form;
    var csrf = form && form.querySelector("input[name=csrf]");
    if (!csrf) { return; }
    function put(text) {
      var start = area.selectionStart, end = area.selectionEnd;
      area.value = area.value.slice(0, start) + text + area.value.slice(end);
      area.selectionStart = area.selectionEnd = start + text.length;
    }
    function failed(name, why) {
      var note = document.createElement("p");
      note.className = "error";
      note.setAttribute("role", "alert");
      note.textContent = name + " was not attached: " + why;
      area.parentNode.insertBefore(note, area.nextSibling);
    }
    function upload(file) {
      var name = file.name.replace(/[\[\]\\]/g, "");
      var pending = "[Uploading " + name + "…]()";
      var body = new FormData();
      body.append("csrf", csrf.value);
      body.append("file", file);
      put(pending);
      fetch(area.getAttribute("data-upload"), { method: "POST", body: body, credentials: "same-origin" })
        .then(function (response) {
          if (response.ok) { return response.json(); }
          return response.text().then(function (text) { throw new Error(text || response.statusText); });
        })
        .then(function (sent) {
          var link = (/^image\//.test(file.type) ? "!" : "") + "[" + name + "](/attachments/" + sent.uuid + ")";
          area.value = area.value.replace(pending, link);
          var field = document.createElement("input");
          field.type = "hidden";
          field.name = "files";
          field.value = sent.uuid;
          form.appendChild(field);
        })
        .catch(function (error) {
          area.value = area.value.replace(pending, "");
          failed(name, error.message);
        });
    }
    area.addEventListener("dragover", function (event) {
      var types = event.dataTransfer ? Array.prototype.slice.call(event.dataTransfer.types) : [];
      if (types.indexOf("Files") >= 0) { event.preventDefault(); }
    });
    area.addEventListener("drop", function (event) {
      var files = event.dataTransfer && event.dataTransfer.files;
      if (!files || !files.length) { return; }
      event.preventDefault();
      Array.prototype.forEach.call(files, upload);
    });
  });

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", paintLabels);
  } else {
    paintLabels();
  }
})();
