() => {
    // Gradio re-creates a plot at every update (its Plot component is keyed on the figure), so a zoom would last
    // until the next poll and Plotly's own uirevision can't keep it. This remembers each monitor chart's ranges as
    // the user zooms or pans, per the figure's uirevision (the runs and x axis it shows, app/charts.py), and puts
    // them back on each new plot; a double-click (autoscale) forgets them. Installed once per page.
    if (window.grpoZoom) return [];
    const saved = (window.grpoZoom = {});
    const RANGES = ["xaxis.range[0]", "xaxis.range[1]", "yaxis.range[0]", "yaxis.range[1]"];
    const watch = (plot) => {
        const chart = plot.closest('[id^="chart-"]');
        if (!chart || plot.grpoZoomWatched || typeof plot.on !== "function") return;
        plot.grpoZoomWatched = true;
        plot.on("plotly_relayout", (event) => {
            const revision = plot.layout && plot.layout.uirevision;
            if ("xaxis.autorange" in event || "yaxis.autorange" in event) {
                delete saved[chart.id];
                return;
            }
            const ranges = {};
            for (const key of RANGES) if (key in event) ranges[key] = event[key];
            if (!Object.keys(ranges).length) return;  // a resize, not a zoom
            const kept = saved[chart.id] && saved[chart.id].revision === revision ? saved[chart.id].ranges : {};
            saved[chart.id] = { revision, ranges: { ...kept, ...ranges } };
        });
        const zoom = saved[chart.id];
        if (zoom && plot.layout && zoom.revision === plot.layout.uirevision) {
            requestAnimationFrame(() => window.Plotly.relayout(plot, zoom.ranges));
        }
    };
    const scan = () => document.querySelectorAll('[id^="chart-"] .js-plotly-plot').forEach(watch);
    const changes = { childList: true, subtree: true, attributes: true, attributeFilter: ["class"] };
    new MutationObserver(scan).observe(document.body, changes);
    scan();
    return [];
}
