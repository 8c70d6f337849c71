// The interactive page of a pycudagraph graph (Graph.to_html). No network, no library:
// a layered layout of our own (rows by dependency depth, a few barycentre sweeps to
// untangle each row), drawn as SVG; pan, zoom, search, details, collapsible bodies.
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("pcg-data").textContent);
  var NODES = data.nodes, GRAPHS = data.graphs;
  var MAX_CHARS = 38;
  var TYPE_COLOURS = {
    kernel: "#cfe2ff", memcpy: "#d1e7dd", memset: "#d1e7dd", host: "#fff3cd",
    child_graph: "#e5dbff", conditional: "#ffe8cc", event_record: "#f8d7da",
    event_wait: "#f8d7da", mem_alloc: "#e9ecef", mem_free: "#e9ecef", empty: "#ffffff",
    batch_mem_op: "#e3fafc", ext_semaphore_signal: "#f3d9fa", ext_semaphore_wait: "#f3d9fa"
  };

  var svg = document.getElementById("canvas");
  var viewport = document.getElementById("viewport");
  var panel = document.getElementById("panel");
  var searchBox = document.getElementById("search");
  var colourBox = document.getElementById("colour");

  var parentOf = {};      // node id -> id of the container node whose body holds it
  var graphOf = {};       // node id -> id of the graph that holds it
  var collapsed = {};     // container node id -> true
  var placed = {};        // node id -> {x, y, w, h} in page coordinates, after render
  var view = {k: 1, x: 20, y: 20};
  var selected = null, matches = [], matchAt = -1, query = "";
  var critical = {};
  var maxTime = 0;

  Object.keys(GRAPHS).forEach(function (gid) {
    GRAPHS[gid].nodes.forEach(function (id) { graphOf[id] = gid; });
  });
  Object.keys(NODES).forEach(function (id) {
    NODES[id].bodies.forEach(function (b) {
      GRAPHS[b.graph].nodes.forEach(function (child) { parentOf[child] = id; });
    });
    if (NODES[id].time_us && NODES[id].time_us > maxTime) maxTime = NODES[id].time_us;
  });
  if (data.profile) {
    (data.profile.critical_path || []).forEach(function (id) { critical[id] = true; });
    colourBox.value = "time";
  } else {
    colourBox.querySelector("option[value=time]").disabled = true;
  }

  function esc(s) {
    return String(s).replace(/[&<>"']/g, function (c) {
      return {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}[c];
    });
  }
  function short(s) {   // a long qualified name loses its leading scopes first
    // "(anonymous namespace)" is a scope, not an argument list: read as a word of its length
    var bare = s.replace(/\(anonymous namespace\)/g, "_anonymous_namespace_");
    var at = bare.indexOf("::");
    while (s.length > MAX_CHARS && at > 0 && at < bare.search(/[<(]|$/) && at + 2 < s.length) {
      s = s.slice(at + 2);
      bare = bare.slice(at + 2);
      at = bare.indexOf("::");
    }
    return s.length > MAX_CHARS ? s.slice(0, MAX_CHARS - 1) + "\u2026" : s;
  }
  function countInside(id) {
    var n = 0;
    NODES[id].bodies.forEach(function (b) {
      GRAPHS[b.graph].nodes.forEach(function (c) { n += 1 + countInside(c); });
    });
    return n;
  }
  function caption(id) { return NODES[id].label; }
  function leafWidth(id) {
    var sub = (NODES[id].operation || "").length;   // the line under it, in a smaller font
    return Math.min(300, Math.max(96, 20 + 7 * Math.min(caption(id).length, MAX_CHARS), 20 + 6 * sub));
  }

  // ---- layout (layout.js) -------------------------------------------------------------
  function layout(gid) { return pcgLayout(GRAPHS, NODES, collapsed, leafWidth)(gid); }

  // ---- drawing ----------------------------------------------------------------------
  function heat(us) {
    if (us === null || us === undefined) return "#f1f3f5";
    var t = maxTime > 0 ? Math.log(1 + us) / Math.log(1 + maxTime) : 0;
    var stops = [[255, 245, 230], [253, 174, 97], [215, 48, 31]];
    var seg = t < 0.5 ? 0 : 1, f = t < 0.5 ? t * 2 : (t - 0.5) * 2;
    var a = stops[seg], b = stops[seg + 1];
    return "rgb(" + [0, 1, 2].map(function (i) { return Math.round(a[i] + (b[i] - a[i]) * f); }).join(",") + ")";
  }
  function fill(id) {
    var n = NODES[id];
    if (colourBox.value === "time" && data.profile) return heat(n.time_us);
    return TYPE_COLOURS[n.type] || "#f8f9fa";
  }
  function dark(colour) {   // white text on fills darker than the middle of the ramp
    var m = /^rgb\((\d+),(\d+),(\d+)\)$/.exec(colour);
    return !!m && 0.299 * m[1] + 0.587 * m[2] + 0.114 * m[3] < 150;
  }
  function subline(id) {
    var n = NODES[id];
    if (n.bodies.length && collapsed[id]) return n.type + " \u00b7 " + countInside(id) + " nodes inside";
    if (n.time_us !== null && n.time_us !== undefined) {
      var t = n.time_us.toFixed(n.time_us < 10 ? 2 : 1) + " us";
      if (n.runs && n.runs !== 1) t += " \u00d7" + n.runs;
      return (n.operation || n.type) + " \u00b7 " + t;
    }
    return n.operation || n.type;   // a library kernel: what its name says it computes
  }

  function drawGraph(lay, ox, oy, out) {
    lay.edges.forEach(function (e) {
      var a = lay.pos[e[0]], b = lay.pos[e[1]];
      if (!a || !b) return;
      var x1 = ox + a.x + a.w / 2, y1 = oy + a.y + a.h, x2 = ox + b.x + b.w / 2, y2 = oy + b.y;
      var dy = Math.max(20, (y2 - y1) / 2);
      var port = e[2] && e[2] !== "default";
      out.push('<path class="edge' + (port ? ' port' : '') + '" data-from="' + esc(e[0]) +
        '" data-to="' + esc(e[1]) + '" marker-end="url(#arrow)" d="M' + x1 + ',' + y1 + ' C' + x1 + ',' +
        (y1 + dy) + ' ' + x2 + ',' + (y2 - dy) + ' ' + x2 + ',' + y2 + '"></path>');
      if (port) out.push('<text class="edge-label" x="' + ((x1 + x2) / 2 + 4) + '" y="' + ((y1 + y2) / 2) +
        '">' + esc(e[2]) + '</text>');
    });
    Object.keys(lay.pos).forEach(function (id) {
      var p = lay.pos[id], n = NODES[id], x = ox + p.x, y = oy + p.y;
      placed[id] = {x: x, y: y, w: p.w, h: p.h};
      var colour = fill(id);
      var cls = "node" + (n.bodies.length ? " container" : "") + (critical[id] ? " critical" : "") +
        (dark(colour) ? " dark" : "") +
        (n.findings.length ? " has-finding" : "") + (selected === id ? " selected" : "");
      out.push('<g class="' + cls + '" data-id="' + esc(id) + '" transform="translate(' + x + ',' + y + ')">');
      out.push('<title>' + esc(n.label + " [" + n.path + "]") + '</title>');
      out.push('<rect class="box" width="' + p.w + '" height="' + p.h + '" fill="' + colour + '"></rect>');
      var tx = n.bodies.length ? 22 : 8;
      if (n.bodies.length) {
        out.push('<text class="toggle" x="6" y="17" data-toggle="' + esc(id) + '">' +
          (collapsed[id] ? "\u25b8" : "\u25be") + '</text>');
      }
      out.push('<text x="' + tx + '" y="16">' + esc(short(caption(id))) + '</text>');
      out.push('<text class="sub" x="' + tx + '" y="30">' + esc(subline(id)) + '</text>');
      if (n.findings.length) {
        out.push('<circle class="badge" cx="' + (p.w - 2) + '" cy="2" r="8"></circle>' +
          '<text class="badge-text" x="' + (p.w - 5) + '" y="6">!</text>');
      }
      out.push('</g>');
      p.bodies.forEach(function (b) {
        var bx = x + b.x, by = y + b.y;
        out.push('<text class="body-name" x="' + bx + '" y="' + (by - 4) + '">' + esc(b.name) + '</text>');
        out.push('<rect class="body-frame" x="' + (bx - 4) + '" y="' + (by - 2) + '" width="' + (b.w + 8) +
          '" height="' + (b.h + 8) + '"></rect>');
        drawGraph(b.lay, bx, by + 2, out);
      });
    });
  }

  var whole = {w: 0, h: 0};
  function render() {
    placed = {};
    var lay = layout(data.root), out = [];
    drawGraph(lay, 0, 0, out);
    viewport.innerHTML = out.join("");
    whole = {w: lay.w, h: lay.h};
    applyView();
    markMatches();
    var shown = viewport.querySelectorAll("g.node").length;
    document.body.setAttribute("data-rendered", String(shown));
    window.pcgPage.rendered = shown;
  }
  function applyView() {
    viewport.setAttribute("transform", "translate(" + view.x + "," + view.y + ") scale(" + view.k + ")");
  }
  function fit() {
    var r = svg.getBoundingClientRect();
    var k = Math.min((r.width - 40) / Math.max(whole.w, 1), (r.height - 40) / Math.max(whole.h, 1), 1.5);
    view.k = Math.max(k, 0.02);
    view.x = (r.width - whole.w * view.k) / 2;
    view.y = Math.max(20, (r.height - whole.h * view.k) / 2);
    applyView();
  }
  // The first view: the whole graph when its nodes stay readable at that size; else (a
  // long chain of a captured model) its first rows, readable, across the width they need.
  // The fit button (or f) shows the whole graph.
  var READABLE = 0.45;
  function start() {
    var r = svg.getBoundingClientRect();
    var k = Math.min((r.width - 40) / Math.max(whole.w, 1), (r.height - 40) / Math.max(whole.h, 1), 1.5);
    if (k >= READABLE) { fit(); return false; }
    view.k = Math.max(Math.min((r.width - 40) / Math.max(whole.w, 1), 1), READABLE);
    view.x = Math.max(20, (r.width - whole.w * view.k) / 2);
    view.y = 20;
    applyView();
    return true;
  }
  function centreOn(id) {
    var p = placed[id];
    if (!p) return;
    var r = svg.getBoundingClientRect();
    view.k = Math.max(view.k, 0.8);
    view.x = r.width / 2 - (p.x + p.w / 2) * view.k;
    view.y = r.height / 2 - (p.y + p.h / 2) * view.k;
    applyView();
  }

  // ---- details panel --------------------------------------------------------------------
  function rows(pairs) {
    return "<table>" + pairs.map(function (kv) {
      return '<tr><td class="k">' + esc(kv[0]) + '</td><td class="v">' + esc(kv[1]) + "</td></tr>";
    }).join("") + "</table>";
  }
  function links(ids) {
    if (!ids.length) return "<em>none</em>";
    return ids.map(function (o) { return '<a data-go="' + esc(o) + '">' + esc(short(NODES[o].label)) + "</a>"; }).join(", ");
  }
  function neighbours(id) {
    var before = [], after = [];
    GRAPHS[graphOf[id]].edges.forEach(function (e) {
      if (e[1] === id) before.push(e[0]);
      if (e[0] === id) after.push(e[1]);
    });
    return [before, after];
  }
  function showDetails(id) {
    var n = NODES[id], html = [];
    html.push("<h2>" + esc(n.label) + "</h2>");
    html.push(rows([["type", n.type], ["path", n.path]].concat(n.details)));
    if (n.args.length) {
      html.push('<h3>arguments</h3><table id="args">' + n.args.map(function (a) {
        return '<tr><td class="k">' + esc(a[0]) + '</td><td class="v">' + esc(a[1]) + "</td>" +
          (a[2] ? '<td class="d">' + esc(a[2]) + "</td>" : "") + "</tr>";
      }).join("") + "</table>");
    }
    if (n.time_us !== null && n.time_us !== undefined) {
      var t = [["GPU time", n.time_us.toFixed(3) + " us per launch (median)"]];
      if (n.share !== null && n.share !== undefined) t.push(["share", (100 * n.share).toFixed(1) + "% of " + data.profile.total_us.toFixed(1) + " us"]);
      t.push(["runs per launch", String(n.runs)]);
      if (critical[id]) t.push(["critical path", "yes"]);
      html.push("<h3>profile (" + esc(data.profile.method) + ")</h3>" + rows(t));
    }
    if (n.findings.length) {
      html.push("<h3>findings</h3>" + n.findings.map(function (f) {
        return '<div class="finding"><b>' + esc(f.problem) + "</b> at " + esc(f.place) +
          (f.address ? " (" + esc(f.address) + ")" : "") + "</div>";
      }).join(""));
    }
    var nb = neighbours(id);
    html.push("<h3>waits for</h3><p>" + links(nb[0]) + "</p><h3>then</h3><p>" + links(nb[1]) + "</p>");
    if (parentOf[id]) html.push("<h3>inside</h3><p>" + links([parentOf[id]]) + "</p>");
    panel.innerHTML = html.join("");
  }
  function select(id) {
    if (!NODES[id]) return false;
    reveal(id);
    selected = id;
    viewport.querySelectorAll("g.node.selected").forEach(function (el) { el.classList.remove("selected"); });
    var el = viewport.querySelector('g.node[data-id="' + cssEscape(id) + '"]');
    if (el) el.classList.add("selected");
    showDetails(id);
    return true;
  }
  function cssEscape(s) { return String(s).replace(/["\\]/g, "\\$&"); }
  function reveal(id) {   // open every collapsed container above id
    var changed = false, up = parentOf[id];
    while (up) { if (collapsed[up]) { delete collapsed[up]; changed = true; } up = parentOf[up]; }
    if (changed) render();
  }

  // ---- search ---------------------------------------------------------------------------
  function search(q) {
    query = q.trim().toLowerCase();
    matches = [];
    matchAt = -1;
    if (query) {
      Object.keys(NODES).forEach(function (id) {
        var n = NODES[id];
        var hay = n.label;   // the kernel's name (or the node's description) and its mangled name
        n.details.forEach(function (d) { if (d[0] === "mangled name") hay += " " + d[1]; });
        hay = hay.toLowerCase();
        if (hay.indexOf(query) >= 0) matches.push(id);
      });
    }
    markMatches();
    return matches.length;
  }
  function markMatches() {
    var hit = {};
    matches.forEach(function (id) { hit[id] = true; });
    viewport.querySelectorAll("g.node").forEach(function (el) {
      var id = el.getAttribute("data-id");
      el.classList.toggle("match", !!hit[id]);
      el.classList.toggle("dim", !!query && !hit[id]);
    });
    document.getElementById("matches").textContent = query ?
      (matches.length ? (matchAt >= 0 ? (matchAt + 1) + " of " : "") + matches.length + " match" + (matches.length === 1 ? "" : "es") : "no match") : "";
  }
  function next() {
    if (!matches.length) return null;
    matchAt = (matchAt + 1) % matches.length;
    var id = matches[matchAt];
    select(id);
    centreOn(id);
    markMatches();
    return id;
  }

  // ---- interaction ----------------------------------------------------------------------
  var drag = null;   // a press on the canvas: pans while the button is down
  svg.addEventListener("pointerdown", function (ev) {
    if (ev.button !== 0) return;
    drag = {x: ev.clientX, y: ev.clientY, vx: view.x, vy: view.y, moved: false, down: true};
  });
  window.addEventListener("pointermove", function (ev) {
    if (!drag || !drag.down || !(ev.buttons & 1)) return;
    var dx = ev.clientX - drag.x, dy = ev.clientY - drag.y;
    if (Math.abs(dx) + Math.abs(dy) > 4) { drag.moved = true; svg.classList.add("dragging"); }
    if (drag.moved) { view.x = drag.vx + dx; view.y = drag.vy + dy; applyView(); }
  });
  window.addEventListener("pointerup", function () {
    svg.classList.remove("dragging");
    if (drag) drag.down = false;
  });
  svg.addEventListener("wheel", function (ev) {
    ev.preventDefault();
    var r = svg.getBoundingClientRect(), mx = ev.clientX - r.left, my = ev.clientY - r.top;
    var k = Math.min(8, Math.max(0.02, view.k * Math.exp(-ev.deltaY * 0.0015)));
    view.x = mx - (mx - view.x) * k / view.k;
    view.y = my - (my - view.y) * k / view.k;
    view.k = k;
    applyView();
  }, {passive: false});
  svg.addEventListener("click", function (ev) {
    var dragged = drag && drag.moved;
    drag = null;
    if (dragged) return;   // the end of a pan, not a click
    var t = ev.target.closest("[data-toggle]");
    if (t) {
      var cid = t.getAttribute("data-toggle");
      if (collapsed[cid]) delete collapsed[cid]; else collapsed[cid] = true;
      render();
      return;
    }
    var g = ev.target.closest("g.node");
    if (g) select(g.getAttribute("data-id"));
  });
  panel.addEventListener("click", function (ev) {
    var a = ev.target.closest("[data-go]");
    if (a) { var id = a.getAttribute("data-go"); select(id); centreOn(id); }
  });
  searchBox.addEventListener("input", function () { search(searchBox.value); });
  searchBox.addEventListener("keydown", function (ev) {
    if (ev.key === "Enter") { ev.preventDefault(); next(); }
    if (ev.key === "Escape") { searchBox.value = ""; search(""); searchBox.blur(); }
  });
  document.addEventListener("keydown", function (ev) {
    if (ev.target === searchBox) return;
    if (ev.key === "/") { ev.preventDefault(); searchBox.focus(); }
    if (ev.key === "f") fit();
  });
  document.getElementById("fit").addEventListener("click", fit);
  function setAll(closed) {
    collapsed = {};
    if (closed) Object.keys(NODES).forEach(function (id) { if (NODES[id].bodies.length) collapsed[id] = true; });
    render();
    fit();
  }
  document.getElementById("expand").addEventListener("click", function () { setAll(false); });
  document.getElementById("collapse").addEventListener("click", function () { setAll(true); });
  colourBox.addEventListener("change", function () { render(); legend(); });

  function legend() {
    var el = document.getElementById("legend");
    if (colourBox.value === "time" && data.profile) {
      el.innerHTML = '0 us <span class="ramp"></span> ' + esc(maxTime.toFixed(1)) + " us";
    } else {
      var seen = {};
      Object.keys(NODES).forEach(function (id) { seen[NODES[id].type] = true; });
      el.innerHTML = Object.keys(seen).sort().map(function (t) {
        return '<span><span class="swatch" style="background:' + (TYPE_COLOURS[t] || "#f8f9fa") + '"></span>' + esc(t) + "</span>";
      }).join(" ");
    }
  }

  var total = Object.keys(NODES).length, edges = 0;
  Object.keys(GRAPHS).forEach(function (gid) { edges += GRAPHS[gid].edges.length; });
  var stats = total + " nodes \u00b7 " + edges + " edges";
  if (data.profile) stats += " \u00b7 " + data.profile.method + ": " + data.profile.total_us.toFixed(1) + " us per launch";
  if (data.findings) stats += " \u00b7 " + data.findings + " finding" + (data.findings === 1 ? "" : "s");
  document.getElementById("stats").textContent = stats;
  document.body.setAttribute("data-nodes", String(total));

  window.pcgPage = {
    nodes: total, rendered: 0, search: search, next: next, select: select, centreOn: centreOn, fit: fit,
    scale: function () { return view.k; },
    selected: function () { return selected; },
    box: function (id) {   // the node's box on screen, for tests that click it
      var el = viewport.querySelector('g.node[data-id="' + cssEscape(id) + '"] rect.box');
      if (!el) return null;
      var r = el.getBoundingClientRect();
      return {x: r.left, y: r.top, w: r.width, h: r.height};
    },
    expandAll: function () { setAll(false); }, collapseAll: function () { setAll(true); }
  };
  var started = performance.now();
  legend();   // first: the header's height settles before the graph is fitted to the rest
  render();
  if (start()) document.getElementById("stats").textContent += " \u00b7 its start shown; fit (f) shows all";
  window.pcgPage.renderMs = performance.now() - started;
  document.body.setAttribute("data-ready", "1");
})();
