// The file finder, the keyboard shortcuts and the copy buttons. Progressive enhancement only:
// without this script "Go to file" is a page of its own, and every shortcut has a link.
//
// Shortcuts (never while typing in a field, never with Ctrl, Alt or Meta held):
//   t  the file finder      /  the page's search box      y  this page at its commit
//   b  blame of this file   h  history of this path       l  jump to a line      ?  this list
(function () {
  "use strict";
  var link = document.querySelector("a.go-file");
  var data = link ? link.dataset : {};
  var SHOWN = 50;  // rows of the finder's list

  // ---------------------------------------------------------------------------- ranking
  // Kept the same as floorless.web.views.finder.rank: the query's characters in order,
  // ignoring case and spaces; in the file's name before across directories, whole before
  // scattered, fewer runs before more, then shorter paths, then by name.
  function runs(needle, hay, marks) {
    var count = 0, at = 0, previous = -2;
    for (var i = 0; i < needle.length; i++) {
      var found = hay.indexOf(needle.charAt(i), at);
      if (found < 0) { return -1; }
      if (found !== previous + 1) { count += 1; }
      if (marks) { marks.push(found); }
      previous = found; at = found + 1;
    }
    return count;
  }
  function score(entry, needle) {
    var hay = entry.lower, start = entry.nameAt, name = hay.slice(start), r;
    if (name.indexOf(needle) === 0) { return [4, 1]; }
    if (name.indexOf(needle) >= 0) { return [3, 1]; }
    r = runs(needle, name, null);
    if (r >= 0) { return [2, r]; }
    if (hay.indexOf(needle) >= 0) { return [1, 1]; }
    r = runs(needle, hay, null);
    if (r >= 0) { return [0, r]; }
    return null;
  }
  function rank(entries, query) {
    var needle = query.replace(/\s+/g, "").toLowerCase().slice(0, 200);
    if (!needle) { return entries.slice(0, SHOWN); }
    var scored = [];
    for (var i = 0; i < entries.length; i++) {
      var s = score(entries[i], needle);
      if (s) { scored.push([s[0], s[1], entries[i]]); }
    }
    scored.sort(function (a, b) {
      if (a[0] !== b[0]) { return b[0] - a[0]; }
      if (a[1] !== b[1]) { return a[1] - b[1]; }
      var x = a[2].shown, y = b[2].shown;
      if (x.length !== y.length) { return x.length - y.length; }
      return x < y ? -1 : (x > y ? 1 : 0);
    });
    return scored.slice(0, SHOWN).map(function (row) { return row[2]; });
  }
  // Which characters of the shown path to mark: those the ranking matched.
  function marked(entry, query) {
    var needle = query.replace(/\s+/g, "").toLowerCase(), marks = [];
    if (!needle) { return marks; }
    var name = entry.lower.slice(entry.nameAt);
    var whole = name.indexOf(needle);
    if (whole >= 0) {
      for (var i = 0; i < needle.length; i++) { marks.push(entry.nameAt + whole + i); }
      return marks;
    }
    if (runs(needle, name, marks) >= 0) {
      return marks.map(function (n) { return n + entry.nameAt; });
    }
    marks = [];
    whole = entry.lower.indexOf(needle);
    if (whole >= 0) {
      for (var j = 0; j < needle.length; j++) { marks.push(whole + j); }
      return marks;
    }
    runs(needle, entry.lower, marks);
    return marks;
  }

  // A path as the server sent it (percent-encoded bytes) shown as text: UTF-8, with any
  // other byte replaced, as the pages show names.
  function shownPath(encoded) {
    try { return decodeURIComponent(encoded); } catch (e) { /* not UTF-8: decode bytes */ }
    var bytes = [];
    for (var i = 0; i < encoded.length; i++) {
      if (encoded.charAt(i) === "%") {
        bytes.push(parseInt(encoded.substr(i + 1, 2), 16)); i += 2;
      } else { bytes.push(encoded.charCodeAt(i)); }
    }
    return new TextDecoder("utf-8").decode(new Uint8Array(bytes));
  }

  // ----------------------------------------------------------------------------- finder
  var finder = null, entries = null, active = 0, results = [];
  function build() {
    var dialog = document.createElement("dialog");
    dialog.className = "finder";
    dialog.setAttribute("aria-label", "Go to file");
    dialog.innerHTML =
      '<form method="dialog" class="finder-form"><input type="text" class="finder-input" ' +
      'role="combobox" aria-expanded="true" aria-controls="finder-list" aria-autocomplete="list" ' +
      'aria-label="Go to file" placeholder="Go to file" autocomplete="off" spellcheck="false">' +
      '</form><p class="finder-status muted" aria-live="polite"></p>' +
      '<ul id="finder-list" class="finder-list" role="listbox" aria-label="Files"></ul>';
    document.body.appendChild(dialog);
    var input = dialog.querySelector("input"), list = dialog.querySelector("ul");
    var status = dialog.querySelector(".finder-status");
    function show() {
      results = entries ? rank(entries, input.value) : [];
      active = Math.min(active, Math.max(results.length - 1, 0));
      list.textContent = "";
      results.forEach(function (entry, n) {
        var item = document.createElement("li");
        item.id = "finder-" + n;
        item.setAttribute("role", "option");
        var a = document.createElement("a");
        a.href = data.src + "/" + entry.encoded;
        a.tabIndex = -1;
        var marks = marked(entry, input.value), at = 0;
        marks.forEach(function (m) {
          if (m > at) { a.appendChild(document.createTextNode(entry.shown.slice(at, m))); }
          var strong = document.createElement("mark");
          strong.textContent = entry.shown.charAt(m);
          a.appendChild(strong);
          at = m + 1;
        });
        a.appendChild(document.createTextNode(entry.shown.slice(at)));
        item.appendChild(a);
        list.appendChild(item);
      });
      if (entries) {
        status.textContent = results.length ? "" : "No file matches.";
      }
      select(active);
    }
    function select(n) {
      var items = list.querySelectorAll("li");
      items.forEach(function (item, i) { item.setAttribute("aria-selected", i === n ? "true" : "false"); });
      active = n;
      if (items[n]) {
        input.setAttribute("aria-activedescendant", items[n].id);
        items[n].scrollIntoView({ block: "nearest" });
      } else { input.removeAttribute("aria-activedescendant"); }
    }
    input.addEventListener("input", function () { active = 0; show(); });
    input.addEventListener("keydown", function (event) {
      if (event.key === "ArrowDown" || event.key === "ArrowUp") {
        event.preventDefault();
        if (!results.length) { return; }
        var step = event.key === "ArrowDown" ? 1 : -1;
        select((active + step + results.length) % results.length);
      } else if (event.key === "Enter") {
        event.preventDefault();
        var chosen = list.querySelectorAll("li a")[active];
        if (chosen) { window.location.href = chosen.href; }
      }
    });
    // A click on the backdrop (outside the box) closes it.
    dialog.addEventListener("click", function (event) {
      if (event.target === dialog) { dialog.close(); }
    });
    dialog.show_ = show;
    dialog.status_ = status;
    dialog.input_ = input;
    return dialog;
  }
  function load(dialog) {
    if (entries !== null) { return; }
    dialog.status_.textContent = "Loading the list of files…";
    entries = null;
    fetch(data.paths, { headers: { "Accept": "application/json" } })
      .then(function (response) {
        if (!response.ok) { throw new Error(String(response.status)); }
        return response.json();
      })
      .then(function (body) {
        entries = body.paths.map(function (encoded) {
          var shown = shownPath(encoded);
          return { encoded: encoded, shown: shown, lower: shown.toLowerCase(), nameAt: shown.lastIndexOf("/") + 1 };
        });
        dialog.status_.textContent = body.truncated ? "This tree has more files than the finder lists." : "";
        dialog.show_();
      })
      .catch(function () {
        dialog.status_.textContent = "The list of files could not be loaded.";
      });
  }
  // A closed dialog gives the focus back to where it was (or to the page), at once: until
  // the browser moves it, keys would still go to the closed box's field.
  function openModal(dialog) {
    if (dialog.open) { return; }
    var before = document.activeElement;
    if (!dialog.dataset.restores) {
      dialog.dataset.restores = "yes";
      dialog.addEventListener("close", function () {
        var back = dialog.opener_;
        if (back && back !== document.body && document.contains(back) && back.focus) { back.focus(); }
        else if (dialog.contains(document.activeElement)) { document.activeElement.blur(); }
      });
    }
    dialog.opener_ = before;
    dialog.showModal();
  }
  function openFinder() {
    if (!link) { return; }
    if (!finder) { finder = build(); }
    openModal(finder);
    finder.input_.select();
    load(finder);
    finder.show_();
  }
  if (link) {
    link.addEventListener("click", function (event) {
      if (event.button !== 0 || event.ctrlKey || event.metaKey || event.shiftKey || event.altKey) { return; }
      event.preventDefault();
      openFinder();
    });
  }

  // -------------------------------------------------------------------------- copying
  function copyText(value) {
    if (navigator.clipboard && window.isSecureContext) {
      return navigator.clipboard.writeText(value);
    }
    return new Promise(function (resolve, reject) {  // an insecure origin: the old way
      var area = document.createElement("textarea");
      area.value = value;
      area.setAttribute("readonly", "");
      area.className = "copy-scratch";
      document.body.appendChild(area);
      area.select();
      var done = false;
      try { done = document.execCommand("copy"); } catch (e) { done = false; }
      area.remove();
      if (done) { resolve(); } else { reject(new Error("copy refused")); }
    });
  }
  function copyButton(label, title, value) {
    var button = document.createElement("button");
    button.type = "button";
    button.className = "copy";
    button.textContent = label;
    button.title = title;
    button.addEventListener("click", function () {
      Promise.resolve(typeof value === "function" ? value() : value)
        .then(copyText)
        .then(function () { button.textContent = "Copied"; },
              function () { button.textContent = "Copy failed"; })
        .then(function () { setTimeout(function () { button.textContent = label; }, 1500); });
    });
    return button;
  }
  function absolute(path) { return new URL(path, window.location.href).href; }

  document.querySelectorAll(".clone input").forEach(function (clone) {
    clone.closest(".clone").appendChild(copyButton("Copy", "Copy the clone URL", function () { return clone.value; }));
  });
  var actions = document.querySelector(".filebar .actions");
  if (actions && data.path) {
    actions.appendChild(copyButton("Copy path", "Copy the file's path", data.path));
  }
  if (actions && data.raw) {
    actions.appendChild(copyButton("Copy contents", "Copy the file's contents", function () {
      return fetch(data.raw).then(function (response) {
        if (!response.ok) { throw new Error(String(response.status)); }
        return response.text();
      });
    }));
  }
  // A selected line (#L10, #L10-L20) gets a button copying its permanent link.
  var lineButton = null;
  function placeLineButton() {
    if (lineButton) { lineButton.remove(); lineButton = null; }
    var match = /^#L(\d+)(?:-L\d+)?$/.exec(window.location.hash);
    var row = match && document.getElementById("L" + match[1]);
    var cell = row && row.querySelector("td.ln");
    if (!cell) { return; }
    lineButton = copyButton("Copy link", "Copy a permanent link to the line", function () {
      return absolute((data.permalink || window.location.pathname) + window.location.hash);
    });
    lineButton.classList.add("copy-line");
    cell.appendChild(lineButton);
  }
  window.addEventListener("hashchange", placeLineButton);
  placeLineButton();

  // ------------------------------------------------------------------------ shortcuts
  var help = null, lineBox = null;
  var KEYS = [
    ["t", "Go to file"],
    ["/", "Search"],
    ["y", "Permanent link: this page at its commit"],
    ["b", "Blame of this file"],
    ["h", "History of this path"],
    ["l", "Jump to a line"],
    ["?", "These shortcuts"],
    ["Esc", "Close a dialog or menu"]
  ];
  function showHelp() {
    if (!help) {
      help = document.createElement("dialog");
      help.className = "shortcuts";
      help.setAttribute("aria-labelledby", "shortcuts-title");
      var html = '<h2 id="shortcuts-title">Keyboard shortcuts</h2><dl>';
      KEYS.forEach(function (pair) { html += "<dt><kbd>" + pair[0] + "</kbd></dt><dd>" + pair[1] + "</dd>"; });
      html += '</dl><form method="dialog"><button type="submit">Close</button></form>';
      help.innerHTML = html;
      help.addEventListener("click", function (event) { if (event.target === help) { help.close(); } });
      document.body.appendChild(help);
    }
    openModal(help);
  }
  function jumpToLine() {
    if (!document.getElementById("L1")) { return; }
    if (!lineBox) {
      lineBox = document.createElement("dialog");
      lineBox.className = "goto-line";
      lineBox.innerHTML = '<form method="dialog"><label>Jump to line <input type="number" min="1" ' +
        'inputmode="numeric" name="line"></label> <button type="submit">Go</button></form>';
      var form = lineBox.querySelector("form");
      form.addEventListener("submit", function () {
        var n = parseInt(form.line.value, 10);
        if (n > 0) {
          var last = document.querySelectorAll("tr[id^='L']").length;
          window.location.hash = "#L" + Math.min(n, last || n);
        }
      });
      document.body.appendChild(lineBox);
    }
    lineBox.querySelector("input").value = "";
    openModal(lineBox);
  }
  function focusSearch() {
    var box = document.querySelector("form[role='search'] input[name='q']") ||
      document.querySelector("input[type='search'][name='q']") ||
      document.querySelector("input[name='q']");
    if (box) { box.focus(); box.select(); return true; }
    return false;
  }
  function typing(target) {
    if (!target || !target.closest) { return false; }
    if (target.closest("dialog:not([open])")) { return false; }  // focus left in a closed box
    return !!target.closest("input, textarea, select, [contenteditable=''], [contenteditable='true']");
  }
  document.addEventListener("keydown", function (event) {
    if (event.defaultPrevented || event.ctrlKey || event.metaKey || event.altKey) { return; }
    if (typing(event.target) || document.querySelector("dialog[open]")) { return; }
    var key = event.key;
    if (key === "t" && link) {
      event.preventDefault(); openFinder();
    } else if (key === "/") {
      if (focusSearch()) { event.preventDefault(); }
    } else if (key === "y" && data.permalink) {
      event.preventDefault();
      history.replaceState(history.state, "", data.permalink + window.location.search + window.location.hash);
    } else if (key === "b" && data.blame) {
      event.preventDefault(); window.location.href = data.blame + window.location.hash;
    } else if (key === "h" && data.history) {
      event.preventDefault(); window.location.href = data.history;
    } else if (key === "l" && document.getElementById("L1")) {
      event.preventDefault(); jumpToLine();
    } else if (key === "?") {
      event.preventDefault(); showHelp();
    }
  });
})();
