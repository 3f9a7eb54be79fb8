// dh serve: keeps the open page in step with the log over server-sent events. Every value
// from the log is set as text (textContent), never parsed as HTML; the only HTML taken in
// is what dh's own renderer drew (the session list's rows, the trace), fetched from this
// server.
(function () {
  "use strict";
  var body = document.body;
  var stream = body.getAttribute("data-stream");
  var page = body.getAttribute("data-page");
  var state = document.getElementById("live-state");
  var source = null, cursor = null, paused = false, pendingTrace = null, pendingRows = null;

  function say(text) { if (state) state.textContent = text; }

  function streamUrl() {
    if (!cursor) return stream;
    return stream.replace(/([?&])after=[^&]*/, "$1after=" + encodeURIComponent(cursor));
  }

  function track(event) { if (event.lastEventId) cursor = event.lastEventId; }

  function open() {
    if (!stream || !window.EventSource) return;
    source = new EventSource(streamUrl());
    source.addEventListener("open", function () { say("live"); body.setAttribute("data-live", "open"); });
    source.addEventListener("error", function () { say("reconnecting…"); body.setAttribute("data-live", "lost"); });
    if (page === "sessions") source.addEventListener("changed", rowsSoon);
    if (page === "session") {
      source.addEventListener("record", function (e) { track(e); addRecord(JSON.parse(e.data)); });
      source.addEventListener("mark", function (e) { track(e); addMark(JSON.parse(e.data)); });
      source.addEventListener("changed", function (e) { track(e); traceSoon(); });
    }
  }

  function close() {
    if (source) source.close();
    source = null;
    say("paused");
    body.setAttribute("data-live", "closed");
  }

  // the session page -------------------------------------------------------------------------
  function item(cls, kind, text, id) {
    var feed = document.getElementById("feed");
    if (!feed) return;
    if (id && feed.querySelector('[data-id="' + id + '"]')) return;
    var li = document.createElement("li");
    li.className = cls;
    if (id) li.setAttribute("data-id", id);
    var k = document.createElement("span");
    k.className = "kind";
    k.textContent = kind;
    li.appendChild(k);
    li.appendChild(document.createTextNode(text));
    feed.appendChild(li);
    feed.scrollTop = feed.scrollHeight;
  }

  function addRecord(r) {
    var when = r.ts ? new Date(r.ts).toISOString().slice(11, 19) + " " : "";
    var text = r.text || (r.tools ? "tools: " + r.tools : "");
    item("record", r.kind || "record", when + text, String(r.id));
  }

  function addMark(e) {
    var details = e.details ? JSON.stringify(e.details) : "";
    item("mark " + e.type, e.type, (e.attempt ? "attempt " + e.attempt + " " : "") + details,
         "e" + e.seq);
  }

  function traceSoon() {
    if (pendingTrace) return;
    pendingTrace = setTimeout(function () {
      pendingTrace = null;
      var target = document.querySelector(".trace-page");
      if (!target) return;
      fetch(location.pathname + "/trace" + location.search, {credentials: "same-origin"})
        .then(function (r) { return r.ok ? r.text() : null; })
        .then(function (html) { if (html !== null) target.innerHTML = html; });
    }, 300);
  }

  // the documents column reads every record: fetched once the page is drawn
  function documentsLater() {
    var slot = document.getElementById("documents-slot");
    if (!slot) return;
    fetch(slot.getAttribute("data-src"), {credentials: "same-origin"})
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) { if (html) slot.innerHTML = html; });
  }

  // the trace goes on as the reader scrolls: the next page's turns appended below ----------
  function scrollOn() {
    if (page !== "session" || !window.IntersectionObserver) return;
    var loading = false;
    var watcher = new IntersectionObserver(function (entries) {
      entries.forEach(function (e) { if (e.isIntersecting) more(e.target); });
    }, {rootMargin: "800px"});
    function watch() {
      var navs = document.querySelectorAll(".trace-page nav.pages");
      var last = navs[navs.length - 1];
      if (last && last.querySelector("a[rel=next]")) watcher.observe(last);
    }
    function more(nav) {
      var next = nav.querySelector("a[rel=next]");
      if (loading || !next) return;
      loading = true;
      watcher.unobserve(nav);
      var url = new URL(next.href);
      url.pathname += "/trace";
      fetch(url.toString(), {credentials: "same-origin"})
        .then(function (r) { return r.ok ? r.text() : null; })
        .then(function (html) {
          loading = false;
          if (!html) return;
          var fetched = new DOMParser().parseFromString(html, "text/html");
          var trace = document.getElementById("trace");
          fetched.querySelectorAll("#trace > section.turn").forEach(function (s) {
            trace.appendChild(document.adoptNode(s));
          });
          var navs = fetched.querySelectorAll("nav.pages");
          if (navs.length) nav.replaceWith(document.adoptNode(navs[navs.length - 1]));
          watch();
        });
    }
    watch();
  }

  // opt-in notifications (the Notification API; nothing leaves this machine) --------------
  var NOTICES = [["crashed", "crashed"], ["waiting", "is waiting on a limit"], ["finished", "finished"],
                 ["on ", "was taken over"]];
  var notifyButton = document.getElementById("notify-toggle");

  function notifying() {
    return !!window.Notification && Notification.permission === "granted" &&
      localStorage.getItem("dh-notify") === "on";
  }

  function showNotify() {
    if (!notifyButton || !window.Notification) return;
    notifyButton.hidden = false;
    notifyButton.textContent = notifying() ? "notifying" : "notify me";
    notifyButton.setAttribute("aria-pressed", notifying() ? "true" : "false");
  }

  if (notifyButton) {
    notifyButton.addEventListener("click", function () {
      if (notifying()) { localStorage.setItem("dh-notify", "off"); showNotify(); return; }
      Notification.requestPermission().then(function (answer) {
        localStorage.setItem("dh-notify", answer === "granted" ? "on" : "off");
        showNotify();
      });
    });
  }

  function states() {
    var found = {};
    rows().forEach(function (r) { found[r.getAttribute("data-id")] = r.getAttribute("data-state") || ""; });
    return found;
  }

  function announce(before) {
    if (!notifying()) return;
    rows().forEach(function (r) {
      var id = r.getAttribute("data-id"), now = r.getAttribute("data-state") || "";
      if (!(id in before) || before[id] === now) return;
      for (var i = 0; i < NOTICES.length; i++) {
        if (now.indexOf(NOTICES[i][0]) !== 0) continue;
        var title = r.querySelector(".title");
        new Notification("dh: session " + id + " " + NOTICES[i][1],
                         {body: title ? title.textContent : "", tag: id + " " + now});
        return;
      }
    });
  }

  // a waiting session's countdown to its limit's reset; at the reset the page is redrawn --
  function pad(n) { return (n < 10 ? "0" : "") + n; }

  function countdowns() {
    var now = Date.now(), reached = false;
    document.querySelectorAll("[data-reset]").forEach(function (el) {
      var reset = parseInt(el.getAttribute("data-reset"), 10);
      var out = el.querySelector(".countdown"), time = el.querySelector("time.reset");
      if (!reset || !out) return;
      if (time && !time.getAttribute("data-local")) {
        time.textContent = new Date(reset).toLocaleString();
        time.setAttribute("data-local", "1");
      }
      var left = Math.max(0, Math.round((reset - now) / 1000));
      out.textContent = left ? "in " + Math.floor(left / 3600) + "h " + pad(Math.floor(left % 3600 / 60)) +
        "m " + pad(left % 60) + "s" : "now";
      if (!left && !el.getAttribute("data-reached")) { el.setAttribute("data-reached", "1"); reached = true; }
    });
    if (reached) { if (page === "sessions") rowsSoon(); else traceSoon(); }
  }

  // the list ---------------------------------------------------------------------------------
  function rowsSoon() {
    if (pendingRows) return;
    pendingRows = setTimeout(function () {
      pendingRows = null;
      fetch("/rows" + location.search, {credentials: "same-origin"})
        .then(function (r) { return r.ok ? r.json() : null; })
        .then(function (data) {
          if (!data) return;
          var before = states();
          document.getElementById("rows").innerHTML = data.rows;
          announce(before);
          var count = document.getElementById("count");
          if (count) count.textContent = count.textContent.replace(/^[\d,]+/, data.total.toLocaleString("en"));
        });
    }, 300);
  }

  // keys: / search, j/k move through the sessions, Enter opens one --------------------------
  function rows() { return Array.prototype.slice.call(document.querySelectorAll("#rows tr[data-id]")); }

  document.addEventListener("keydown", function (e) {
    var tag = (e.target.tagName || "").toLowerCase();
    if (tag === "input" || tag === "select" || tag === "textarea" || e.ctrlKey || e.metaKey || e.altKey) return;
    if (e.key === "/") {
      var q = document.getElementById("f-q");
      if (q) { e.preventDefault(); q.focus(); }
      return;
    }
    if (e.key !== "j" && e.key !== "k") return;
    var all = rows();
    if (!all.length) return;
    var at = all.indexOf(document.activeElement && document.activeElement.closest
                         ? document.activeElement.closest("tr") : null);
    var next = all[Math.max(0, Math.min(all.length - 1, at + (e.key === "j" ? 1 : -1)))];
    var link = next.querySelector("a");
    if (link) link.focus();
    all.forEach(function (r) { r.classList.toggle("cursor", r === next); });
  });

  var toggle = document.getElementById("live-toggle");
  if (toggle) {
    toggle.addEventListener("click", function () {
      paused = !paused;
      toggle.textContent = paused ? "resume" : "pause";
      toggle.setAttribute("aria-pressed", paused ? "true" : "false");
      if (paused) close(); else open();
    });
  }
  showNotify();
  countdowns();
  setInterval(countdowns, 1000);
  documentsLater();
  scrollOn();
  open();
}());
