// idem dashboard: the overview chart (uPlot), refreshed by polling.
(function () {
  "use strict";
  function start() {
    var el = document.getElementById("chart");
    if (!el || typeof uPlot === "undefined") return;
    var status = document.getElementById("chart-status");
    var every = parseInt(el.dataset.refresh, 10) || 5000;
    var plot = null;
    function draw(d) {
      var data = [d.minutes, d.completed, d.dead];
      if (plot) { plot.setData(data); return; }
      var width = Math.max(280, Math.min(el.clientWidth || 600, 900));
      plot = new uPlot({
        width: width, height: 220,
        series: [{}, { label: "completed", stroke: "#146c2e", width: 2 },
          { label: "dead", stroke: "#a50e0e", width: 2 }],
        axes: [{}, { label: "jobs / min" }]
      }, data, el);
    }
    function load() {
      fetch(el.dataset.src, { credentials: "same-origin", headers: { Accept: "application/json" } })
        .then(function (r) { return r.json().then(function (b) { return { ok: r.ok, body: b }; }); })
        .then(function (r) {
          if (!r.ok) { status.textContent = "Chart not updated: " + (r.body.error || "error"); return; }
          status.textContent = r.body.capped ? "Based on the latest " + r.body.scan +
            " completed and " + r.body.scan + " dead jobs: more finished in the hour, so the chart is low." : "";
          draw(r.body);
        })
        .catch(function () { status.textContent = "Chart not updated: the server did not answer."; });
    }
    load();
    setInterval(load, every);
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
