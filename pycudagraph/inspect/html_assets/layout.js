// The page's layered layout (Graph.to_html): each graph laid out on its own, rows by the
// longest dependency path from the roots (a root moves down to just above the first node
// that waits for it), a few barycentre sweeps to untangle each row, then x positions
// pulled under each node's parents and over its children. A child graph or conditional
// body is laid out first and drawn inside its node, which grows to hold it.
//
// pcgLayout(graphs, nodes, collapsed, leafWidth)(gid) ->
//   {w, h, pos: {id: {x, y, w, h, bodies: [{name, x, y, w, h, lay}]}}, edges}
var PCG_LAYOUT = {H: 38, GAP_X: 26, GAP_Y: 48, PAD: 14, HEAD: 30, BODY_LABEL: 16};

function pcgLayout(GRAPHS, NODES, collapsed, leafWidth) {
  "use strict";
  var H = PCG_LAYOUT.H, GAP_X = PCG_LAYOUT.GAP_X, GAP_Y = PCG_LAYOUT.GAP_Y,
      PAD = PCG_LAYOUT.PAD, HEAD = PCG_LAYOUT.HEAD, BODY_LABEL = PCG_LAYOUT.BODY_LABEL;
  function layout(gid) {
    var g = GRAPHS[gid], ids = g.nodes, pos = {}, preds = {}, succs = {}, index = {};
    ids.forEach(function (id, i) {
      preds[id] = []; succs[id] = []; index[id] = i;
      var n = NODES[id], box = {x: 0, y: 0, w: leafWidth(id), h: H, bodies: []};
      if (n.bodies.length && !collapsed[id]) {
        var w = PAD, h = 0;
        n.bodies.forEach(function (b) {
          var lay = layout(b.graph), bw = Math.max(lay.w, 90);
          box.bodies.push({name: b.name, x: w, y: HEAD + BODY_LABEL, w: bw, h: lay.h, lay: lay});
          w += bw + PAD; h = Math.max(h, lay.h);
        });
        box.w = Math.max(w, box.w);
        box.h = HEAD + BODY_LABEL + h + PAD;
      }
      pos[id] = box;
    });
    g.edges.forEach(function (e) {
      if (pos[e[0]] && pos[e[1]]) { succs[e[0]].push(e[1]); preds[e[1]].push(e[0]); }
    });
    // rows: longest path from the roots (Kahn's order)
    var waiting = {}, row = {}, ready = [], order = [];
    ids.forEach(function (id) { waiting[id] = preds[id].length; row[id] = 0; if (!waiting[id]) ready.push(id); });
    while (ready.length) {
      var id = ready.pop();
      order.push(id);
      succs[id].forEach(function (s) {
        row[s] = Math.max(row[s], row[id] + 1);
        if (--waiting[s] === 0) ready.push(s);
      });
    }
    if (order.length < ids.length) ids.forEach(function (id) { if (waiting[id] > 0) row[id] = 0; });
    order.forEach(function (id) {   // a root sits just above the first node that waits for it
      if (preds[id].length || !succs[id].length) return;
      var first = Infinity;
      succs[id].forEach(function (s) { first = Math.min(first, row[s]); });
      row[id] = Math.max(row[id], first - 1);
    });
    var rows = [];
    ids.forEach(function (id) { (rows[row[id]] = rows[row[id]] || []).push(id); });
    rows = rows.filter(function (r) { return r && r.length; });
    var slot = {};
    function number() { rows.forEach(function (r) { r.forEach(function (id, i) { slot[id] = i; }); }); }
    number();
    function centre(list) {
      if (!list.length) return null;
      var s = 0; list.forEach(function (o) { s += slot[o]; }); return s / list.length;
    }
    for (var sweep = 0; sweep < 4; sweep++) {   // barycentre ordering, down then up
      var down = sweep % 2 === 0;
      var seq = down ? rows : rows.slice().reverse();
      seq.forEach(function (r) {
        var key = {};
        r.forEach(function (id) {
          var c = centre(down ? preds[id] : succs[id]);
          key[id] = c === null ? slot[id] : c;
        });
        r.sort(function (a, b) { return key[a] - key[b] || index[a] - index[b]; });
        r.forEach(function (id, i) { slot[id] = i; });
      });
    }
    // x: pack each row, then pull nodes under their parents (and over their children)
    rows.forEach(function (r) {
      var x = 0;
      r.forEach(function (id) { pos[id].x = x; x += pos[id].w + GAP_X; });
    });
    function mid(id) { return pos[id].x + pos[id].w / 2; }
    function place(r, want) {
      var prev = -Infinity;
      r.forEach(function (id) {
        var x = Math.max(want[id] - pos[id].w / 2, prev);
        pos[id].x = x; prev = x + pos[id].w + GAP_X;
      });
      for (var i = r.length - 2; i >= 0; i--) {   // pull back what was pushed right
        var a = r[i], b = r[i + 1];
        var limit = pos[b].x - GAP_X - pos[a].w;
        if (pos[a].x > limit) pos[a].x = limit;
        else pos[a].x = Math.min(limit, Math.max(pos[a].x, want[a] - pos[a].w / 2));
      }
    }
    for (var pass = 0; pass < 3; pass++) {
      var downward = pass % 2 === 0;
      var seqr = downward ? rows.slice(1) : rows.slice(0, -1).reverse();
      seqr.forEach(function (r) {
        var want = {};
        r.forEach(function (id) {
          var near = downward ? preds[id] : succs[id];
          if (!near.length) { want[id] = mid(id); return; }
          var s = 0; near.forEach(function (o) { s += mid(o); }); want[id] = s / near.length;
        });
        place(r, want);
      });
    }
    var minX = Infinity, maxX = 0, y = 0;
    ids.forEach(function (id) { minX = Math.min(minX, pos[id].x); });
    if (!isFinite(minX)) minX = 0;
    rows.forEach(function (r) {
      var h = 0;
      r.forEach(function (id) {
        pos[id].x -= minX; pos[id].y = y; h = Math.max(h, pos[id].h);
        maxX = Math.max(maxX, pos[id].x + pos[id].w);
      });
      y += h + GAP_Y;
    });
    return {w: Math.max(maxX, 60), h: Math.max(y - GAP_Y, H), pos: pos, edges: g.edges};
  }
  return layout;
}
