// The instance page's GPU charts: one chart per figure, one line per card, drawn with the vendored
// uPlot (static/vendor/uplot) from the metrics API. Short ranges refresh every 15 s while the instance
// runs and the tab is visible; the rest is drawn once per range.
(function () {
  "use strict";
  var COLOURS = ["#4f46e5", "#16a34a", "#dc2626", "#9333ea", "#ea580c", "#0891b2", "#ca8a04", "#db2777"];
  var LIVE_RANGES = { "15m": true, "1h": true, "6h": true };
  var HEIGHT = 170;

  function chartWidth(el) {
    return Math.max(200, Math.floor(el.getBoundingClientRect().width));
  }

  function format(name, v) {
    if (v === null || v === undefined) return "—";
    if (name === "memory_used_mib") return v.toFixed(1) + " GiB";
    if (name === "utilization_pct") return Math.round(v) + " %";
    if (name === "power_w") return Math.round(v) + " W";
    return Math.round(v) + " °C";
  }

  function init(root) {
    var url = root.getAttribute("data-url");
    var range = root.getAttribute("data-range") || "1h";
    var refresh = parseInt(root.getAttribute("data-refresh") || "0", 10);
    var cardLabel = root.getAttribute("data-card-label") || "GPU";
    var plots = {};
    var timer = null;
    var pending = null;

    function drawProcesses(processes) {
      // Built with textContent: a process name is whatever the user's program called itself.
      var body = root.querySelector("[data-gpu-processes]");
      if (!body) return;
      var rows = processes || [];
      body.replaceChildren.apply(body, rows.map(function (p) {
        var tr = document.createElement("tr");
        [cardLabel + " " + p.card, p.pid, p.name || "—", p.memory_used_mib === null ? "—" : p.memory_used_mib].forEach(function (v) {
          var td = document.createElement("td");
          td.textContent = String(v);
          tr.appendChild(td);
        });
        return tr;
      }));
      root.querySelector("[data-gpu-processes-table]").hidden = rows.length === 0;
      root.querySelector("[data-gpu-processes-empty]").hidden = rows.length > 0;
    }

    function draw(data) {
      drawProcesses(data.processes);
      var hasData = data.cards.some(function (c) {
        return c.utilization_pct.some(function (v) { return v !== null; });
      });
      root.querySelector("[data-gpu-empty]").hidden = hasData;
      var summary = root.querySelector("[data-gpu-summary]");
      var all = [];
      data.cards.forEach(function (c) {
        c.utilization_pct.forEach(function (v) { if (v !== null) all.push(v); });
      });
      summary.textContent = all.length
        ? cardLabel + " ⌀ " + Math.round(all.reduce(function (a, b) { return a + b; }, 0) / all.length) + " %"
        : "";
      root.querySelectorAll("[data-chart]").forEach(function (el) {
        var name = el.getAttribute("data-chart");
        var scale = name === "memory_used_mib" ? 1 / 1024 : 1;
        var series = [{}];
        var columns = [data.t];
        data.cards.forEach(function (c, i) {
          series.push({
            label: cardLabel + " " + c.card,
            stroke: COLOURS[i % COLOURS.length],
            width: 1.5,
            value: function (u, v) { return format(name, v); },
          });
          columns.push(c[name].map(function (v) { return v === null ? null : v * scale; }));
        });
        var key = data.range + ":" + data.cards.length;
        var plot = plots[name];
        if (plot && plot._key === key) {
          plot.setData(columns);
          return;
        }
        if (plot) plot.destroy();
        var y = name === "utilization_pct" ? { range: [0, 100] } : { range: function (u, min, max) { return [0, Math.max(1, max || 0) * 1.1]; } };
        plot = new uPlot({
          width: chartWidth(el),
          height: HEIGHT,
          series: series,
          scales: { x: { time: true }, y: y },
          axes: [{}, { size: 46, values: function (u, vals) { return vals.map(function (v) { return +v.toFixed(1); }); } }],
          legend: { show: data.cards.length > 0, live: true },
          cursor: { sync: { key: "gpu-" + url } },
        }, columns, el);
        plot._key = key;
        plots[name] = plot;
      });
    }

    function load() {
      if (pending) pending.abort();
      pending = new AbortController();
      fetch(url + "?range=" + encodeURIComponent(range), {
        credentials: "same-origin",
        headers: { Accept: "application/json" },
        signal: pending.signal,
      }).then(function (response) {
        if (!response.ok) throw new Error(response.status);
        return response.json();
      }).then(function (data) {
        root.querySelector("[data-gpu-error]").hidden = true;
        draw(data);
      }).catch(function (error) {
        if (error.name !== "AbortError") root.querySelector("[data-gpu-error]").hidden = false;
      });
    }

    function schedule() {
      if (timer) clearInterval(timer);
      timer = null;
      if (refresh > 0 && LIVE_RANGES[range]) {
        timer = setInterval(function () { if (!document.hidden) load(); }, refresh * 1000);
      }
    }

    root.querySelectorAll("[data-range]").forEach(function (button) {
      button.addEventListener("click", function () {
        range = button.getAttribute("data-range");
        root.querySelectorAll("[data-range]").forEach(function (b) {
          b.setAttribute("aria-pressed", b === button ? "true" : "false");
        });
        load();
        schedule();
      });
    });

    var resizing = null;
    window.addEventListener("resize", function () {
      clearTimeout(resizing);
      resizing = setTimeout(function () {
        Object.keys(plots).forEach(function (name) {
          var el = root.querySelector('[data-chart="' + name + '"]');
          plots[name].setSize({ width: chartWidth(el), height: HEIGHT });
        });
      }, 150);
    });

    load();
    schedule();
  }

  function start() {
    if (typeof uPlot === "undefined") return;
    document.querySelectorAll("[data-gpu-charts]").forEach(init);
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
