// The Monitor's charts (and its learning panel's), drawn here from the one payload each poll sends
// (app/web/widgets/chart_payload.py says what it holds), keyed by the id of the box each is drawn in. Put first in the
// page's head with the other scripts (app/web/page_script.py); a carrier (an invisible gr.HTML, app/web/pages/monitor.py
// CARRIER) hands each payload of its stream to window.grpoCharts.apply and keeps the token it returns as its value,
// which the next poll sends back: the server then knows what this page holds.
//
// Plotly is the one bundle the server serves at a versioned address with a year's cache (PLOTLY_URL, filled in by
// app/web/page_script.py), loaded once per page: as the page has loaded when its address opens the Monitor, else
// when the Monitor's widgets are first mounted. A chart is drawn only while its box is on screen (an IntersectionObserver:
// the closed "More charts" and charts scrolled far away wait), and redrawn by Plotly.react in its own div, which keeps
// a user's zoom across redraws by the figure's uirevision.
(() => {
  const PLOTLY_URL = "__PLOTLY_URL__";
  const CONFIG = { responsive: true, displaylogo: false };
  const figures = {}; // box id -> {data, layout, source, version}
  const inSight = new Set(); // the names of the charts whose boxes are on screen (or nearly)
  const watched = new WeakSet();
  let template = null;
  const applied = {}; // stream -> the token of the last payload of it applied
  let plotly = null; // the promise of the library
  let library = null; // the library, once loaded (window.Plotly may be Gradio's own by then)

  const load = () =>
    (plotly ||= new Promise((resolve, reject) => {
      const script = document.createElement("script");
      script.src = PLOTLY_URL;
      // Gradio's own bundle (the learning panel's, the Sweeps tab's plots) sets window.Plotly too: this keeps ours
      script.onload = () => resolve((library = window.Plotly));
      script.onerror = () => {
        plotly = null;
        reject(new Error("the chart library did not load"));
      };
      document.head.appendChild(script);
    }));

  const box = (name) => document.getElementById(name);

  const draw = async (name) => {
    const figure = figures[name];
    const element = box(name);
    const plot = element && element.querySelector(".chart-plot");
    if (!figure || !plot || plot.grpoVersion === figure.version) return;
    const Plotly = await load();
    if (figures[name] !== figure || plot.grpoVersion === figure.version) return; // a newer one came meanwhile
    plot.grpoVersion = figure.version;
    const layout = { ...figure.layout, template, autosize: true };
    await Plotly.react(plot, figure.data, layout, CONFIG);
  };

  const sight = new IntersectionObserver(
    (entries) => {
      for (const entry of entries) {
        const name = entry.target.id;
        if (entry.isIntersecting) {
          inSight.add(name);
          draw(name);
        } else inSight.delete(name);
      }
    },
    { rootMargin: "200px" },
  );

  const watch = (name) => {
    const element = box(name);
    if (element && !watched.has(element)) {
      watched.add(element);
      sight.observe(element); // answers at once with whether it is on screen
    }
  };

  const hide = (name) => {
    delete figures[name];
    const element = box(name);
    if (!element) return;
    element.classList.add("monitor-chart-none");
    const plot = element.querySelector(".chart-plot");
    if (plot && plot.classList.contains("js-plotly-plot") && library) library.purge(plot);
    if (plot) plot.grpoVersion = undefined;
  };

  const extend = (figure, change) => {
    const data = figure.data.map((trace) => ({ ...trace }));
    for (const [index, xs, ys] of change.extend) {
      data[index].x = (data[index].x || []).concat(xs);
      data[index].y = (data[index].y || []).concat(ys);
    }
    return { data, layout: change.layout || figure.layout };
  };

  let version = 0;
  // One payload of ``stream`` applied; returns the token to send back (the last payload of the stream applied, if
  // this one could not be).
  const apply = (payload, stream) => {
    const last = applied[stream] ?? null;
    if (payload.base !== null && payload.base !== last) return last; // built on a payload this page missed
    const charts = Object.entries(payload.charts);
    if (charts.some(([name, change]) => change.extend && !figures[name])) return last; // the same, to be safe
    if (payload.template) template = payload.template;
    for (const [name, change] of charts) {
      if (change.hidden) {
        hide(name);
        continue;
      }
      const source = change.figure && JSON.stringify(change.figure);
      if (source && figures[name] && figures[name].source === source) continue; // sent whole again, as drawn
      const figure = change.figure ? { ...change.figure, source } : extend(figures[name], change);
      figure.version = ++version;
      figures[name] = figure;
      const element = box(name);
      if (element) {
        element.classList.remove("monitor-chart-none");
        element.setAttribute("aria-label", change.label);
      }
    }
    sync();
    applied[stream] = payload.token;
    return payload.token;
  };

  // Every chart held watched in the boxes now on the page, and drawn where on screen: after a payload, and when the
  // Monitor's widgets are mounted (new boxes, nothing drawn in them; Plotly is wanted soon)
  const sync = () => {
    load().catch(() => {});
    for (const name of Object.keys(figures)) {
      watch(name);
      if (inSight.has(name)) draw(name);
    }
  };

  window.grpoCharts = { apply, sync };
  // A deep link to the Monitor needs Plotly soon: fetched and evaluated while Gradio's page builds itself, from the
  // page's load event on (a script added before it holds the load event back until it has run)
  if (new URLSearchParams(window.location.search).get("tab") === "monitor") {
    window.addEventListener("load", () => load().catch(() => {}), { once: true });
  }
})();
