// Instances: live status over the per-user WebSocket, and the launch page's price and "why not".
(function () {
  "use strict";

  // --- Live status -------------------------------------------------------------------------------
  // The server says which instance changed; the page fetches the same partial a reload would render:
  // the badge, the reason and the buttons that status allows (Start once stopped, Stop while running…)
  // come in one swap.
  var refreshing = {}; // instance id → "busy" while its partials are on their way, "again" if it changed meanwhile

  function reloadList() {
    var table = document.getElementById("instance-table");
    if (table && window.htmx) {
      window.htmx.ajax("GET", window.location.pathname + window.location.search, { source: table, target: table, swap: "outerHTML" });
    }
  }

  function refresh(id) {
    if (refreshing[id]) { refreshing[id] = "again"; return; }
    var elements = document.querySelectorAll('[data-live-instance="' + id + '"]');
    // A new instance in the list (launched from another tab or the API): reload the table.
    var list = document.querySelector("[data-live-list]");
    if (list && !elements.length) {
      reloadList();
    }
    if (!elements.length || !window.htmx) return;
    refreshing[id] = "busy";
    // Each element is its request's source: without one htmx queues every call on <body>, where a
    // third event drops the second's request, and a queued request swaps into an element an earlier
    // swap has already replaced (the newer status never shows).
    var swaps = Array.prototype.map.call(elements, function (el) {
      return window.htmx.ajax("GET", el.getAttribute("data-live-url"), { source: el, target: el, swap: "outerHTML" });
    });
    // Another event for this instance while its partial is on its way (stopping, then stopped a
    // moment later) is fetched once more after the swap, into the element the swap put there.
    function done() {
      var again = refreshing[id] === "again";
      delete refreshing[id];
      if (again) refresh(id);
    }
    Promise.all(swaps).then(done, done);
  }

  // Events sent while this page had no socket (between its render and the socket's opening, or
  // while it reconnected) are lost, and with the socket open a busy partial stops polling: fetch what
  // they would have refreshed. On the first opening only what was busy when the page was rendered
  // (its templates add ``hx-get`` only then); after a reconnect, everything live on the page.
  function catchUp(reconnected) {
    var ids = {};
    document.querySelectorAll("[data-live-instance]").forEach(function (el) {
      if (reconnected || el.hasAttribute("hx-get")) ids[el.getAttribute("data-live-instance")] = true;
    });
    if (reconnected && document.querySelector("[data-live-list]")) {
      reloadList();
      return;
    }
    Object.keys(ids).forEach(refresh);
  }

  function toast(text) {
    var box = document.createElement("div");
    box.className = "alert info live-toast";
    box.setAttribute("role", "status");
    box.textContent = text;
    var content = document.getElementById("content");
    if (content) content.insertBefore(box, content.firstChild);
  }

  // The header bell's count, pushed by notifications.services with each notification and read mark.
  function bell(unread) {
    var badge = document.querySelector("[data-notification-count]");
    if (!badge) return;
    badge.textContent = unread > 99 ? "99+" : String(unread);
    badge.hidden = unread <= 0;
  }

  var openedBefore = false;

  function connect(delay) {
    if (!("WebSocket" in window)) return;
    var scheme = window.location.protocol === "https:" ? "wss://" : "ws://";
    var socket = new WebSocket(scheme + window.location.host + "/ws/events/");
    socket.onopen = function () {
      delay = 1000;
      document.documentElement.setAttribute("data-live", "on");
      catchUp(openedBefore);
      openedBefore = true;
    };
    socket.onmessage = function (message) {
      var event;
      try { event = JSON.parse(message.data); } catch (e) { return; }
      if (event.type === "instance") refresh(event.id);
      if ((event.type === "quota" || event.type === "notice") && event.message) toast(event.message);
      if (typeof event.unread === "number") bell(event.unread);
    };
    socket.onclose = function (event) {
      document.documentElement.setAttribute("data-live", "off");
      if (event.code === 4401) return; // logged out
      setTimeout(function () { connect(Math.min(delay * 2, 30000)); }, delay);
    };
  }

  document.addEventListener("DOMContentLoaded", function () {
    if (document.querySelector("[data-live-instance], [data-live-list]") || document.body.classList.contains("app")) {
      connect(1000);
    }
    launchPage();
  });

  // --- The launch page -------------------------------------------------------------------------------
  function fmt(template, values) {
    return template.replace(/%\((\w+)\)s/g, function (_, key) { return values[key]; });
  }
  function cny(fen) {
    var sign = fen < 0 ? "-" : "";
    fen = Math.abs(Math.round(fen));
    var yuan = Math.floor(fen / 100), cents = fen % 100;
    return sign + "¥" + yuan.toLocaleString("en") + "." + (cents < 10 ? "0" : "") + cents;
  }
  // Billing's rounding: round(price × seconds / 3600), halves up, in integers.
  function owed(hourlyFen, seconds) {
    return Math.floor((2 * hourlyFen * seconds + 3600) / 7200);
  }

  function launchPage() {
    var form = document.getElementById("launch-form");
    var data = document.getElementById("launch-options");
    var strings = document.getElementById("launch-strings");
    if (!form || !data || !strings) return;
    var options = JSON.parse(data.textContent);
    var s = strings.dataset;
    var button = document.getElementById("launch-button");
    var why = document.getElementById("launch-why");

    function value(name) {
      var checked = form.querySelector('input[name="' + name + '"]:checked');
      if (checked) return checked.value;
      var field = form.querySelector('[name="' + name + '"]');
      return field ? field.value : "";
    }

    function regionMaxNodes(region) {
      var found = options.regions.filter(function (r) { return String(r.id) === region; })[0];
      return found && found.max_nodes ? found.max_nodes : 1;
    }

    // ``nodes`` > 1: a cluster, ``count`` cards on each of that many nodes, priced and counted as a whole.
    function reasonFor(gpu, region, count, nodes) {
      var cap = gpu.regions[region] || { free: 0, best: 0, fits: {} };
      if (nodes > regionMaxNodes(region)) {
        return { text: fmt(s.nodesMax, { nodes: nodes, max: regionMaxNodes(region) }) };
      }
      // On demand, one node's cards may be taken back from interruptible work (preempted for it).
      var best = nodes === 1 && value("tier") !== "interruptible" ? Math.max(cap.best, cap.best_on_demand || 0) : cap.best;
      if (best < count) {
        return { text: fmt(s.capacity, { count: count, gpu: gpu.name, best: cap.best }) };
      }
      var fit = (cap.fits || {})[String(count)] || 0;
      if (nodes > 1 && fit < nodes) {
        return { text: fmt(s.nodesCapacity, { nodes: nodes, count: count, gpu: gpu.name, fit: fit }) };
      }
      var cards = count * nodes;
      if (gpu.used + cards > gpu.quota) {
        return { text: fmt(s.quota, { count: cards, used: gpu.used, quota: gpu.quota, gpu: gpu.name }), link: s.quotaUrl + "?gpu=" + gpu.id + "#request", label: s.quotaLink };
      }
      var hourly = priceOf(gpu) * cards;
      var needed = owed(options.burn_fen_per_hour + hourly, options.min_runway_s);
      if (options.balance_fen < needed) {
        return { text: fmt(s.funds, { balance: cny(options.balance_fen), minutes: Math.round(options.min_runway_s / 60), needed: cny(needed) }), link: s.billingUrl, label: s.fundsLink };
      }
      return null;
    }

    // The card-hour price of the chosen tier: interruptible work pays the catalogue's spot price.
    function priceOf(gpu) {
      return value("tier") === "interruptible" ? gpu.spot_price_fen : gpu.price_fen;
    }

    function update() {
      var region = value("region");
      var count = parseInt(value("gpu_count") || "1", 10);
      var nodes = parseInt(value("node_count") || "1", 10);
      var gpuId = value("gpu_model");
      var disk = parseInt(value("disk_gb") || "0", 10) || 0;
      var chosen = null;
      options.gpus.forEach(function (gpu) {
        var card = form.querySelector('.gpu-card[data-gpu="' + gpu.id + '"]');
        if (!card) return;
        var cap = gpu.regions[region] || { free: 0, best: 0 };
        card.querySelector("[data-free]").textContent = (cap.free > 0 ? fmt(s.free, { free: cap.free, best: cap.best }) : s.none)
          + (cap.waiting ? " · " + fmt(s.waiting, { waiting: cap.waiting }) : "");
        var reason = reasonFor(gpu, region, count, nodes);
        card.classList.toggle("unavailable", !!reason);
        card.querySelector("[data-why]").textContent = reason ? reason.text : "";
        if (String(gpu.id) === gpuId) { chosen = gpu; card.classList.add("selected"); } else { card.classList.remove("selected"); }
      });
      if (!chosen) return;
      document.getElementById("price-hour").textContent = cny(priceOf(chosen) * count * nodes) + "/h";
      document.getElementById("price-detail").textContent = fmt(nodes > 1 ? s.detailNodes : s.detail, {
        nodes: nodes, count: count, price: cny(priceOf(chosen)), disk: cny(disk * options.disk_price_fen_per_gb_day)
      });
      var reason = reasonFor(chosen, region, count, nodes);
      button.disabled = !!reason;
      why.hidden = !reason;
      why.textContent = "";
      if (reason) {
        why.appendChild(document.createTextNode(reason.text + " "));
        if (reason.link) {
          var a = document.createElement("a");
          a.href = reason.link; a.textContent = reason.label;
          why.appendChild(a);
        }
      }
    }
    // On arrival and after a change of region, a GPU model that cannot launch there is not left
    // chosen while another can: the region's default (the server's choice: the user's last model,
    // else the cheapest with room) if it can, else the cheapest that can. A click on one that cannot
    // still shows why.
    function pickAvailable() {
      var region = value("region");
      var count = parseInt(value("gpu_count") || "1", 10);
      var nodes = parseInt(value("node_count") || "1", 10);
      var gpuId = value("gpu_model");
      var current = options.gpus.filter(function (g) { return String(g.id) === gpuId; })[0];
      if (current && !reasonFor(current, region, count, nodes)) return;
      var preferred = String((options.defaults.gpu_by_region || {})[region]);
      var fitting = options.gpus
        .filter(function (g) { return !reasonFor(g, region, count, nodes); })
        .sort(function (a, b) {
          return (String(b.id) === preferred) - (String(a.id) === preferred) || a.price_fen - b.price_fen;
        });
      var input = fitting[0] && form.querySelector('input[name="gpu_model"][value="' + fitting[0].id + '"]');
      if (input) input.checked = true;
    }
    // Volumes attach in their own region only: the others are greyed out and cleared.
    function volumesForRegion() {
      var region = value("region");
      form.querySelectorAll("tr[data-volume-region]").forEach(function (row) {
        var here = row.getAttribute("data-volume-region") === region;
        row.classList.toggle("unavailable", !here);
        row.querySelectorAll("input, select").forEach(function (field) {
          if (!here && field.type === "checkbox") field.checked = false;
          field.disabled = !here;
        });
      });
    }
    // Each image says whether the nodes of the chosen region and GPU model hold it (no pull) or not.
    function imageCacheForRegion() {
      var region = value("region");
      var gpu = value("gpu_model");
      form.querySelectorAll("[data-image-cache-region]").forEach(function (line) {
        line.hidden =
          line.getAttribute("data-image-cache-region") !== region || line.getAttribute("data-image-cache-gpu") !== gpu;
      });
    }
    form.addEventListener("change", function (event) {
      if (event.target && event.target.name === "region") { pickAvailable(); volumesForRegion(); }
      imageCacheForRegion();
      update();
    });
    form.addEventListener("input", update);
    pickAvailable();
    volumesForRegion();
    imageCacheForRegion();
    update();
  }
})();
