// The suite page's chart: pass rate per run (points) with 95% interval bars (floating bars),
// drawn by the vendored Chart.js. Data comes from a json_script element; run names are
// untrusted and only ever reach the canvas as text (never the DOM, never innerHTML).
(function () {
  "use strict";

  function draw() {
    var source = document.getElementById("suite-history-data");
    var canvas = document.getElementById("suite-history-chart");
    if (!source || !canvas || typeof window.Chart === "undefined") return;
    var rows = JSON.parse(source.textContent);
    var labels = rows.map(function (r) { return r.label; });
    var chart = new window.Chart(canvas, {
      data: {
        labels: labels,
        datasets: [
          {
            type: "bar", label: "95% interval", order: 2,
            data: rows.map(function (r) { return r.low === null ? null : [r.low, r.high]; }),
            backgroundColor: "rgba(40, 84, 197, 0.18)", borderColor: "rgba(40, 84, 197, 0.6)",
            borderWidth: 1, barPercentage: 0.25, categoryPercentage: 1.0
          },
          {
            type: "line", label: "pass rate", order: 1,
            data: rows.map(function (r) { return r.rate; }),
            borderColor: "#2854c5", backgroundColor: "#2854c5", pointRadius: 4,
            spanGaps: false  // a run with nothing graded is a gap, not a point on the line
          }
        ]
      },
      options: {
        animation: false, responsive: true, maintainAspectRatio: false,
        scales: { y: { min: 0, max: 100, title: { display: true, text: "pass rate (%)" } } },
        plugins: {
          tooltip: {
            callbacks: {
              label: function (ctx) {
                var r = rows[ctx.dataIndex];
                if (ctx.dataset.type === "bar") {
                  return r.low === null ? "interval undefined" : "95% CI " + r.low + "–" + r.high + "%";
                }
                return r.rate === null ? "nothing graded" : "pass rate " + r.rate + "% (" + r.n_cases + " cases)";
              }
            }
          }
        }
      }
    });
    canvas.dataset.ready = "true";
    return chart;
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", draw);
  } else {
    draw();
  }
})();
